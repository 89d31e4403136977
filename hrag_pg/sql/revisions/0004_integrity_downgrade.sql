-- Undo revision 0004: drop the integrity functions.
DROP FUNCTION hrag.repair_integrity();
DROP FUNCTION hrag.check_integrity();
