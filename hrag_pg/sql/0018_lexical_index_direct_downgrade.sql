-- Undo revision 0018: the lexical index with GIN's default fast update (a pending list) again.

ALTER INDEX hrag.nodes_lexical_terms_idx RESET (fastupdate);
