-- Revision 0029: each document keeps the sum of its search targets' unit
-- vectors (summed per collection), which places a question's background;
-- the hand-set per-model vector_baseline goes.  Current definitions:
-- hrag_pg/sql/tables.sql, lexical.sql, search.sql; reasoning:
-- docs/decisions.md, "Scores above the question's background".

-- (Through EXECUTE: Citus forwards a propagated DDL command's query string to
-- the workers, and this file is sent as one string of several commands.)
DO $$
BEGIN
    EXECUTE 'ALTER TABLE hrag.documents ADD COLUMN embedding_sum vector({{embedding_dim}})';
    EXECUTE 'ALTER TABLE hrag.collection_sizes ADD COLUMN embedding_sum vector({{embedding_dim}})';
    EXECUTE 'ALTER TABLE hrag.collection_models DROP COLUMN vector_baseline';
END
$$;
COMMENT ON COLUMN hrag.documents.embedding_sum IS
    'The sum of the document''s search targets'' unit vectors, kept by hrag.refresh_document_terms: a collection''s mean direction';
COMMENT ON TABLE hrag.collection_sizes IS
    'Per collection, its search targets (the N of the lexical IDF), stored tokens and the sum of their unit vectors: the sums of its rows, kept from hrag.documents by its triggers';
