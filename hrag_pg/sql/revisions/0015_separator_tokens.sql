-- hrag-pg revision 0015: a node's stored size counts the markup between its texts.
--
-- Why: nodes.subtree_tokens is the budget's unit (hrag.retrieve and
-- hrag.retrieve_hits take nodes while their subtree_tokens fit max_tokens),
-- and a node is returned as its full text: its texts *and* the separators
-- between them.  Ingestion summed only the texts, so a separator holding
-- markup (reStructuredText keeps a `.. _label:` target or a `.. toctree::`
-- there) was returned but not counted: a context reported 1,976 tokens for
-- 2,073 real ones under a 2,000-token budget.  Ingestion now counts the
-- separators that hold more than whitespace (Markdown's blank lines count
-- nothing, so the PostgreSQL manual's sizes are unchanged).
--
-- The values are written by ingestion, which has the tokenizer; SQL cannot
-- recount them.  Documents stored before this revision keep their sizes
-- until they are ingested again (unchanged text re-embeds nothing; the rows
-- whose size changes are updated in place).  Only the column's comment
-- changes here.

COMMENT ON COLUMN hrag.nodes.subtree_tokens IS
    'Tokens of the node''s full text (token_count of its subtree''s nodes with text, plus the separators between them that hold more than whitespace): the unit of hrag.retrieve''s budget';
