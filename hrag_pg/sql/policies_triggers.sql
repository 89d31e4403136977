-- hrag-pg: what ties the tables to the functions: the row-level security
-- policies of every table and the triggers that keep the collection
-- statistics.
--
-- Applied once, by a fresh install (schema_sql.install), after every other
-- topic file (the policies call hrag.visible_collections(), the triggers
-- hrag._document_terms_changed() and hrag._documents_changed()).  On Citus,
-- hrag.distribute() replaces the policies' scalar subqueries with
-- hrag._collection_visible() and drops the triggers (distribution.sql).

-- Each role may read its own bindings (and nothing about other tenants).
-- Roles are looked up by oid: pg_has_role() by *name* raises "role does not
-- exist" for the binding of a dropped role, which would make every table
-- read by every other tenant and reader fail.
CREATE POLICY tenant_collections_own ON hrag.tenant_collections
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = role_name
                      AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')));

-- Every other table: a tenant sees and writes only its collections; a role
-- bound to none (visible_collections() NULL) sees everything.  The scalar
-- subqueries become InitPlans: evaluated once per query, not per row.
CREATE POLICY documents_by_collection ON hrag.documents
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY nodes_by_collection ON hrag.nodes
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY document_terms_by_collection ON hrag.document_terms
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY collection_terms_by_collection ON hrag.collection_terms
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY collection_sizes_by_collection ON hrag.collection_sizes
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY collection_models_by_collection ON hrag.collection_models
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY reembed_documents_by_collection ON hrag.reembed_documents
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));
CREATE POLICY reembed_nodes_by_collection ON hrag.reembed_nodes
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));

-- The triggers that sum hrag.document_terms and hrag.documents into the
-- per-collection statistics (lexical.sql says why statement triggers).
SELECT hrag._keep_collection_statistics();
