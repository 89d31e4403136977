-- hrag-pg, tenancy.sql: tenants.  A role bound to collections in
-- hrag.tenant_collections sees and writes only those (the policies of
-- policies_triggers.sql call hrag.visible_collections; on Citus
-- _collection_visible); hrag.create_tenant_role and hrag.grant_reader make
-- such roles and read-only ones.  docs/decisions.md, "Row-level security
-- keyed on collection, opt-in per role".
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.visible_collections (last changed in revision 0005)
-- The collections visible to the current user, or NULL if it is no tenant
-- (then it sees everything: tenancy is opt-in per role).  Read through the
-- tenant_collections policy, so a role sees only its own bindings.
CREATE OR REPLACE FUNCTION hrag.visible_collections()
RETURNS text[]
LANGUAGE sql STABLE
AS $$
    SELECT array_agg(t.collection) FROM hrag.tenant_collections t
$$;
COMMENT ON FUNCTION hrag.visible_collections() IS
    'The collections the current role is bound to, or NULL if it is not a tenant (sees everything)';

-- hrag._is_member_of (last changed in revision 0009)
-- Policy helpers without subqueries: Citus evaluates policies on the shards,
-- where a subquery on another table cannot run.  Role membership by oid, so
-- the binding of a dropped role does not make the check fail.
CREATE OR REPLACE FUNCTION hrag._is_member_of(role_name name)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                       FROM pg_catalog.pg_roles r WHERE r.rolname = _is_member_of.role_name), false)
$$;
COMMENT ON FUNCTION hrag._is_member_of(name) IS
    'internal: is the current user a member of this role (false for a dropped role); a policy helper without subqueries';

-- hrag._collection_visible (last changed in revision 0009)
-- Whether a collection is visible to the current user: the shard-side form
-- of the policies, installed by hrag.distribute.
CREATE OR REPLACE FUNCTION hrag._collection_visible(collection text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT v IS NULL OR _collection_visible.collection = ANY (v)
      FROM (SELECT hrag.visible_collections() AS v) AS t
$$;
COMMENT ON FUNCTION hrag._collection_visible(text) IS
    'internal: may the current user see this collection; the RLS policies call it on Citus (no subqueries there)';

-- hrag.grant_reader (last changed in revision 0025)
-- Read access for a reader or a tenant: the tables the modes read and
-- execute on the functions, but not the repair functions, which rewrite
-- rows; the policies still restrict which rows it sees.
CREATE OR REPLACE FUNCTION hrag.grant_reader(role_name name) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA hrag TO %I', role_name);
    EXECUTE format('GRANT SELECT ON hrag.documents, hrag.nodes, hrag.document_terms, hrag.collection_terms, '
                   'hrag.collection_sizes, hrag.config, hrag.collection_models TO %I', role_name);
    -- The Python API checks the schema revision before its first call.
    IF to_regclass('hrag.alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON hrag.alembic_version TO %I', role_name);
    END IF;
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hrag TO %I', role_name);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION hrag.repair_integrity(), hrag._repair_document(uuid), '
                   'hrag.grant_reader(name), hrag.create_tenant_role(name, text[], boolean), '
                   'hrag._keep_collection_statistics() FROM %I', role_name);
END
$$;
COMMENT ON FUNCTION hrag.grant_reader(name) IS
    'Let a role retrieve (read tables, call functions) but not write';
REVOKE ALL ON FUNCTION hrag.grant_reader(name) FROM PUBLIC;

-- hrag.create_tenant_role (last changed in revision 0025)
-- A role (created if missing) bound to its collections, reading them and,
-- with can_write, writing and re-embedding them; the policies keep every
-- other collection's rows out of its reach.  Calling it again adds bindings.
CREATE OR REPLACE FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean DEFAULT false) RETURNS void
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
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON hrag.documents, hrag.nodes, hrag.document_terms, '
                       'hrag.collection_terms, hrag.collection_sizes, hrag.collection_models TO %I', role_name);
        -- (a tenant that writes may re-embed its collections: the rows are its collections' only)
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON hrag.reembed_documents, hrag.reembed_nodes TO %I',
                       role_name);
    END IF;
END
$$;
COMMENT ON FUNCTION hrag.create_tenant_role(name, text[], boolean) IS
    'Create or update a role that sees only the given collections (row-level security); can_write lets it ingest';
REVOKE ALL ON FUNCTION hrag.create_tenant_role(name, text[], boolean) FROM PUBLIC;
