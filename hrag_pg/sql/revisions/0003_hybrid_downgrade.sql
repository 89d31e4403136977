-- Undo revision 0003: drop the hybrid scoring functions.
-- Current definitions: hrag_pg/sql/lexical.sql, search.sql.
DROP FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real);
ALTER TABLE hrag.nodes DROP COLUMN lexical_terms;
DROP FUNCTION hrag.node_lexical_terms(text[], text, jsonb);
DROP FUNCTION hrag.lexical_terms(text);
