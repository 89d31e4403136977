-- Revision 0005: tenant isolation by row-level security on collection.
-- A role bound to collections sees only them, through the tables and every
-- (SECURITY INVOKER) function; unbound roles see everything, as before.
-- Current definitions: hrag_pg/sql/tenancy.sql, policies_triggers.sql;
-- reasoning: docs/decisions.md, "Row-level security keyed on collection, opt-in per role".

CREATE TABLE hrag.tenant_collections (
    role_name  name NOT NULL,
    collection text NOT NULL,
    PRIMARY KEY (role_name, collection)
);
COMMENT ON TABLE hrag.tenant_collections IS
    'Roles bound to collections: a bound role sees only its collections (row-level security)';

-- Each role may read its own bindings (and nothing about other tenants).
-- Roles are looked up by oid: pg_has_role() by *name* raises "role does not
-- exist" for the binding of a dropped role, which would make every table
-- read by every other tenant and reader fail.
ALTER TABLE hrag.tenant_collections ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_collections_own ON hrag.tenant_collections
    USING (EXISTS (SELECT 1 FROM pg_catalog.pg_roles r
                    WHERE r.rolname = role_name
                      AND pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')));
GRANT SELECT ON hrag.tenant_collections TO PUBLIC;

-- The collections visible to the current user, or NULL if it is no tenant.
CREATE FUNCTION hrag.visible_collections()
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT array_agg(t.collection) FROM hrag.tenant_collections t
$$;

ALTER TABLE hrag.documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.nodes ENABLE ROW LEVEL SECURITY;

-- The scalar subqueries become InitPlans: evaluated once per query, not per row.
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

-- Read access to everything a retrieval needs, and nothing else: no writes,
-- no DDL.  Usable for any role; tenants get it from create_tenant_role.
CREATE FUNCTION hrag.grant_reader(role_name name)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA hrag TO %I', role_name);
    EXECUTE format('GRANT SELECT ON hrag.documents, hrag.nodes, hrag.config TO %I', role_name);
    -- The Python API checks the schema revision before its first call.
    IF to_regclass('hrag.alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON hrag.alembic_version TO %I', role_name);
    END IF;
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hrag TO %I', role_name);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION hrag.repair_integrity(), hrag.grant_reader(name), '
                   'hrag.create_tenant_role(name, text[], boolean) FROM %I', role_name);
END
$$;

-- Create (or update) a login-less tenant role bound to the given collections.
-- With can_write it may also ingest into them (RLS's WITH CHECK keeps its
-- writes inside its collections).
CREATE FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF collections IS NULL OR cardinality(collections) = 0 THEN
        RAISE EXCEPTION 'hrag: a tenant role needs at least one collection'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
    END IF;
    INSERT INTO hrag.tenant_collections (role_name, collection)
    SELECT create_tenant_role.role_name, c FROM unnest(collections) AS c
    ON CONFLICT DO NOTHING;
    PERFORM hrag.grant_reader(role_name);
    IF can_write THEN
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON hrag.documents, hrag.nodes TO %I', role_name);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION hrag.grant_reader(name) FROM PUBLIC;
REVOKE ALL ON FUNCTION hrag.create_tenant_role(name, text[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION hrag.repair_integrity() FROM PUBLIC;
