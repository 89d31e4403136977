-- Undo revision 0003: drop the hybrid scoring functions.
DROP FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real);
DROP FUNCTION hrag.lexical_terms(text);
