-- hrag-pg, vector_index.sql: the HNSW index over nodes.embedding, defined in
-- one place: its state (for check_integrity), its creation (the bulk path
-- drops and rebuilds it; repair_integrity rebuilds it after a crash) and the
-- removal of failed builds.  A concurrent build that fails leaves an invalid
-- index that costs writes and serves no search.
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag._vector_index_state (last changed in revision 0006)
-- 'valid' (a usable HNSW index on nodes.embedding), 'invalid' (only a failed
-- or unfinished build), or 'missing'.
CREATE OR REPLACE FUNCTION hrag._vector_index_state()
RETURNS text
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN bool_or(i.indisvalid AND i.indisready) THEN 'valid'
                WHEN count(*) > 0 THEN 'invalid'
                ELSE 'missing' END
      FROM pg_catalog.pg_index i
      JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_catalog.pg_am am ON am.oid = ic.relam
     WHERE i.indrelid = 'hrag.nodes'::regclass
       AND am.amname = 'hnsw'
$$;
COMMENT ON FUNCTION hrag._vector_index_state() IS 'internal: valid, invalid or missing, not part of the API';

-- hrag._create_vector_index (last changed in revision 0006)
-- The one definition of the ANN index (cosine HNSW over embedded leaves),
-- used by repair_integrity and by the bulk path to rebuild it.
CREATE OR REPLACE FUNCTION hrag._create_vector_index()
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    CREATE INDEX nodes_embedding_hnsw_idx ON hrag.nodes
        USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
END
$$;
COMMENT ON FUNCTION hrag._create_vector_index() IS 'internal: the HNSW index definition, not part of the API';
REVOKE ALL ON FUNCTION hrag._create_vector_index() FROM PUBLIC;

-- hrag._drop_invalid_vector_indexes (last changed in revision 0006)
-- Drops every HNSW index on nodes that is not valid, whatever its name, so
-- the rebuild starts clean.
CREATE OR REPLACE FUNCTION hrag._drop_invalid_vector_indexes()
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    name text;
BEGIN
    FOR name IN
        SELECT ic.oid::regclass::text
          FROM pg_catalog.pg_index i
          JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
          JOIN pg_catalog.pg_am am ON am.oid = ic.relam
         WHERE i.indrelid = 'hrag.nodes'::regclass AND am.amname = 'hnsw'
           AND NOT (i.indisvalid AND i.indisready)
    LOOP
        EXECUTE format('DROP INDEX %s', name);
    END LOOP;
END
$$;
COMMENT ON FUNCTION hrag._drop_invalid_vector_indexes() IS 'internal: used by repair_integrity, not part of the API';
REVOKE ALL ON FUNCTION hrag._drop_invalid_vector_indexes() FROM PUBLIC;
