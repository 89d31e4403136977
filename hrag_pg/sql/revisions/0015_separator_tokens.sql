-- Revision 0015: nodes.subtree_tokens counts the markup separators a node is
-- returned with (ingestion writes the values); only the column's comment
-- changes here.  Older documents keep their sizes until re-ingested.
-- Current definitions: hrag_pg/sql/tables.sql;
-- measurements: docs/decisions.md, "Each node stores the text before it (`separator`); headings keep their markers".

COMMENT ON COLUMN hrag.nodes.subtree_tokens IS
    'Tokens of the node''s full text (token_count of its subtree''s nodes with text, plus the separators between them that hold more than whitespace): the unit of hrag.retrieve''s budget';
