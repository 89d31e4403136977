-- Undo revision 0015: revision 0007's comment on nodes.subtree_tokens, verbatim.
-- Current definitions: hrag_pg/sql/tables.sql.

COMMENT ON COLUMN hrag.nodes.subtree_tokens IS
    'Sum of token_count over the node''s subtree (nodes with text): the unit of hrag.retrieve''s budget';
