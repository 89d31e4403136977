-- Undo revision 0005: drop tenant isolation.  Roles created by
-- hrag.create_tenant_role are left in place (roles are cluster-wide and may
-- be used elsewhere); their grants on hrag objects vanish with the objects.
-- Current definitions: hrag_pg/sql/tenancy.sql, policies_triggers.sql.
DROP POLICY nodes_by_collection ON hrag.nodes;
DROP POLICY documents_by_collection ON hrag.documents;
ALTER TABLE hrag.nodes DISABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.documents DISABLE ROW LEVEL SECURITY;
DROP FUNCTION hrag.create_tenant_role(name, text[], boolean);
DROP FUNCTION hrag.grant_reader(name);
DROP FUNCTION hrag.visible_collections();
DROP TABLE hrag.tenant_collections;
