-- Undo revision 0001: remove everything hrag created and nothing else.
-- The alembic version table and the (then empty) schema are dropped by the
-- migration environment after the last revision is gone.
-- Current definitions: hrag_pg/sql/tables.sql.

DROP TABLE hrag.nodes;
DROP TABLE hrag.documents;

-- Drop pgvector only if we installed it, and only if nothing of the user's
-- depends on it by now (then it stays, with a notice).
DO $$
BEGIN
    IF (SELECT created_vector_extension FROM hrag.config) THEN
        BEGIN
            DROP EXTENSION vector;
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'hrag: keeping extension "vector": other objects use it';
        END;
    END IF;
END
$$;

DROP TABLE hrag.config;
