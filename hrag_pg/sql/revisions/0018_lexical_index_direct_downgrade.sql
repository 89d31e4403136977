-- Undo revision 0018: the lexical index with GIN's default fast update (a pending list) again.
-- Current definitions: hrag_pg/sql/tables.sql.

-- (Through EXECUTE, as in the upgrade: Citus forwards the command's query string.)
DO $$
BEGIN
    EXECUTE 'ALTER INDEX hrag.nodes_lexical_terms_idx RESET (fastupdate)';
END
$$;
