-- Undo revision 0004: drop the integrity functions.
-- Current definitions: hrag_pg/sql/integrity.sql.
DROP FUNCTION hrag.repair_integrity();
DROP FUNCTION hrag.check_integrity();
