-- hrag-pg, vector_index.sql: the HNSW index over nodes.embedding: its state as check_integrity
-- reports it, and its (re)creation after a bulk load or a crash.
--
-- The current definitions (docs/migrations.md says how to change one); the
-- revision that last changed each is named above it, and its file in
-- revisions/ has the longer history.  Applied by a fresh install and by the
-- newest revision that changes this topic (schema_sql.apply_topic).

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
-- The vector index: check and repair.
-- The one definition of the ANN index (also used by the bulk path to rebuild it).
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
