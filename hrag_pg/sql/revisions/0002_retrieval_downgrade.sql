-- Undo revision 0002: drop the retrieval functions.
-- Current definitions: hrag_pg/sql/search.sql, parent_child.sql, merge.sql, text.sql.
DROP FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb);
DROP FUNCTION hrag.auto_merge_hits(uuid[], real[], real);
DROP FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer);
DROP FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real);
DROP FUNCTION hrag.search_leaves(vector, integer, text, jsonb);
DROP FUNCTION hrag.node_text(uuid);
DROP FUNCTION hrag._check_threshold(real);
DROP FUNCTION hrag._check_hits(uuid[], real[]);
DROP FUNCTION hrag._check_count(integer, text, integer);
DROP FUNCTION hrag._check_query(vector, jsonb);
