-- Revision 0018: the lexical GIN index takes rows directly (fastupdate =
-- off), so questions no longer read a pending list after an ingest; slower
-- inserts, small against ingestion.  On Citus it is propagated to the shards.
-- Current definitions: hrag_pg/sql/tables.sql;
-- measurements: docs/decisions.md, "The lexical index takes rows directly, without GIN's pending list".

-- (Through EXECUTE: Citus forwards a propagated DDL command's query string to
-- the workers, and this file is sent as one string of several commands.)
DO $$
BEGIN
    EXECUTE 'ALTER INDEX hrag.nodes_lexical_terms_idx SET (fastupdate = off)';
END
$$;

-- Merge what is pending now, so the change takes effect at once.
SELECT gin_clean_pending_list('hrag.nodes_lexical_terms_idx'::regclass);
