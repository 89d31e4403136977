-- hrag-pg revision 0018: the lexical index takes new rows directly (no pending list).
--
-- Why: hrag.search_hybrid finds its lexical candidates through the GIN index
-- nodes_lexical_terms_idx (every hybrid mode and the budget mode run it).
-- GIN's default "fast update" keeps newly inserted entries in an unsorted
-- pending list, up to gin_pending_list_limit (4 MB) until a VACUUM merges
-- them, and every index scan reads the whole list.  Ingestion inserts its
-- rows one document per transaction, so a collection that was just ingested,
-- or is being re-ingested, carries up to 4 MB of pending entries until
-- autovacuum next visits the table; each question then pays for reading
-- them.  Measured on the whole PostgreSQL manual (32,477 leaves, 64
-- questions, interleaved p50): with 192 pending pages (1.5 MB, 3,842
-- entries) search_hybrid took 4.82 ms against 3.23 ms once the list was
-- merged, hrag.retrieve 6.74 ms against 5.29 ms; a full list costs more.
--
-- Inserting without the pending list is slower per row but small against
-- ingestion: the lexical terms of all 32,477 leaves, one transaction per
-- document, took 4.5-5.0 s into a GIN index without fast update against
-- 1.7 s with it (1.0-1.1 s with no index), where the ingestion they belong
-- to takes 570 s (bulk) to 1,014 s.  Reads no longer depend on when
-- autovacuum last ran.
--
-- On Citus the ALTER INDEX is propagated to the shards' indexes; the pending
-- list cleaned here is the local one (shards merge theirs at their next
-- vacuum, and gather no new ones).

-- (Through EXECUTE: Citus forwards a propagated DDL command's query string to
-- the workers, and this file is sent as one string of several commands.)
DO $$
BEGIN
    EXECUTE 'ALTER INDEX hrag.nodes_lexical_terms_idx SET (fastupdate = off)';
END
$$;

-- Merge what is pending now, so the change takes effect at once.
SELECT gin_clean_pending_list('hrag.nodes_lexical_terms_idx'::regclass);
