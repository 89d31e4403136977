-- Revision 0009: distributable keys (nodes keyed by (document_id, id), no
-- ON UPDATE CASCADE) and hrag.distribute(), which converts what Citus cannot
-- hold (UNIQUE (collection, source), scalar-subquery RLS) right before it
-- distributes.
-- Current definitions: hrag_pg/sql/tables.sql, distribution.sql;
-- reasoning: docs/decisions.md, "Distributable keys; Citus-only conversions happen in hrag.distribute()".

ALTER TABLE hrag.nodes DROP CONSTRAINT nodes_pkey;
ALTER TABLE hrag.nodes ADD CONSTRAINT nodes_pkey PRIMARY KEY (document_id, id);

ALTER TABLE hrag.nodes DROP CONSTRAINT nodes_document_fk;
ALTER TABLE hrag.nodes ADD CONSTRAINT nodes_document_fk FOREIGN KEY (document_id, collection)
    REFERENCES hrag.documents (id, collection) ON DELETE CASCADE;
ALTER TABLE hrag.document_terms DROP CONSTRAINT document_terms_document_id_collection_fkey;
ALTER TABLE hrag.document_terms ADD CONSTRAINT document_terms_document_id_collection_fkey
    FOREIGN KEY (document_id, collection) REFERENCES hrag.documents (id, collection) ON DELETE CASCADE;

-- ---------------------------------------------------------------------------
-- hrag.node_text(document_id, node_id): a node's full text, looked up with
-- its document id.  The same text as hrag.node_text(node_id), but both scans
-- filter on the distribution column, so on Citus it runs on the one shard
-- that holds the document (hrag.distribute() also makes it a distributed
-- function, so the whole call is delegated to that shard's worker); on a
-- single node it reads the primary key instead of the id index.  NULL for
-- an unknown (document, node) pair.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.node_text(document_id uuid, node_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    first_seq integer;
    last_seq  integer;
BEGIN
    SELECT n.seq, n.subtree_end INTO first_seq, last_seq
      FROM hrag.nodes n
     WHERE n.document_id = node_text.document_id
       AND n.id = node_text.node_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- Called here, not per row inside the lookup: on Citus a function that
    -- reads nodes must not run inside a query pushed down to a shard.
    RETURN hrag._subtree_text(node_text.document_id, first_seq, last_seq);
END
$$;
COMMENT ON FUNCTION hrag.node_text(uuid, uuid) IS
    'Full text of a node looked up with its document id (one shard on Citus); NULL if the pair is unknown';

-- ---------------------------------------------------------------------------
-- Policy helpers without subqueries (Citus evaluates policies on the shards).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._is_member_of(role_name name)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT coalesce((SELECT pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                       FROM pg_catalog.pg_roles r WHERE r.rolname = _is_member_of.role_name), false)
$$;

CREATE FUNCTION hrag._collection_visible(collection text)
RETURNS boolean
LANGUAGE sql STABLE
AS $$
    SELECT v IS NULL OR _collection_visible.collection = ANY (v)
      FROM (SELECT hrag.visible_collections() AS v) AS t
$$;

COMMENT ON FUNCTION hrag._is_member_of(name) IS
    'internal: is the current user a member of this role (false for a dropped role); a policy helper without subqueries';
COMMENT ON FUNCTION hrag._collection_visible(text) IS
    'internal: may the current user see this collection; the RLS policies call it on Citus (no subqueries there)';

-- ---------------------------------------------------------------------------
-- hrag.distribute(): distribute an installation over a Citus cluster.
--
-- Run on the coordinator after `hrag migrate` (every node needs pgvector
-- and Citus installed; Citus creates the hrag schema, pgvector and the
-- functions on the workers).  documents are distributed by id, nodes and
-- document_terms (the lexical statistics) by document_id, colocated with
-- documents, so a document, its tree and its statistics live on one shard; hrag.config and hrag.tenant_collections become
-- reference tables (a copy on every node).  Existing rows are moved.
-- Idempotent: tables already distributed are left alone.  Returns one row
-- per table with what was done.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.distribute(shard_count integer DEFAULT NULL)
RETURNS TABLE (table_name text, distribution text, action text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    spec   record;
    method text;
    tbl    text;
    moved  text[] := '{}';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'hrag: this server has no Citus extension, so there is nothing to distribute over (run hrag.distribute() on a Citus coordinator after CREATE EXTENSION citus)'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
        RAISE EXCEPTION 'hrag: argument "shard_count" must be between 1 and 64000, got %', shard_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- One connection per worker for the whole call: Citus distributes a
    -- function only in a transaction that has not fanned out in parallel.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);

    -- Single-node constructs Citus cannot hold (see the header of this file).
    -- Only while the tables are still local: a distributed table has none.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.documents'::regclass) THEN
        ALTER TABLE hrag.documents DROP CONSTRAINT IF EXISTS documents_collection_source_key;
        CREATE INDEX IF NOT EXISTS documents_collection_source_idx ON hrag.documents (collection, source);
        ALTER POLICY documents_by_collection ON hrag.documents
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.nodes'::regclass) THEN
        ALTER POLICY nodes_by_collection ON hrag.nodes
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.document_terms'::regclass) THEN
        ALTER POLICY document_terms_by_collection ON hrag.document_terms
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.tenant_collections'::regclass) THEN
        ALTER POLICY tenant_collections_own ON hrag.tenant_collections USING (hrag._is_member_of(role_name));
    END IF;

    FOR spec IN
        SELECT * FROM (VALUES (1, 'hrag.config', 'reference', NULL::text),
                              (2, 'hrag.tenant_collections', 'reference', NULL),
                              (3, 'hrag.documents', 'id', NULL),
                              (4, 'hrag.nodes', 'document_id', 'hrag.documents'),
                              (5, 'hrag.document_terms', 'document_id', 'hrag.documents'))
                       AS s(ord, tbl, col, colocate)
         ORDER BY ord
    LOOP
        SELECT CASE p.partmethod WHEN 'n' THEN 'reference'
                                 ELSE 'by ' || pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END
          INTO method
          FROM pg_dist_partition p WHERE p.logicalrelid = spec.tbl::regclass;
        IF FOUND THEN
            table_name := spec.tbl; distribution := method; action := 'already distributed';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF spec.col = 'reference' THEN
            PERFORM create_reference_table(spec.tbl::regclass);
            distribution := 'reference';
        ELSIF spec.colocate IS NULL THEN
            IF shard_count IS NULL THEN
                PERFORM create_distributed_table(spec.tbl::regclass, spec.col);
            ELSE
                PERFORM create_distributed_table(spec.tbl::regclass, spec.col, shard_count => shard_count);
            END IF;
            distribution := 'by ' || spec.col;
        ELSE
            PERFORM create_distributed_table(spec.tbl::regclass, spec.col, colocate_with => spec.colocate);
            distribution := 'by ' || spec.col || ', colocated with ' || spec.colocate;
        END IF;
        moved := spec.tbl || moved;
        table_name := spec.tbl; action := 'distributed';
        RETURN NEXT;
    END LOOP;
    -- The rows were copied to the shards; free their now invisible local copies
    -- (referencing tables first).
    FOREACH tbl IN ARRAY moved LOOP
        PERFORM truncate_local_data_after_distributing_table(tbl::regclass);
    END LOOP;

    -- Per-document functions run where the document lives: a call is
    -- delegated to the worker holding the shard of its document_id argument
    -- (the per-document retrieval steps the coordinator calls join this list).
    IF NOT EXISTS (SELECT 1 FROM pg_dist_object
                    WHERE objid = 'hrag.node_text(uuid, uuid)'::regprocedure
                      AND distribution_argument_index IS NOT NULL AND force_delegation) THEN
        -- force_delegation: also inside transaction blocks (every SQLAlchemy
        -- read is one); safe because the function only reads its document.
        PERFORM create_distributed_function('hrag.node_text(uuid, uuid)'::regprocedure, 'document_id',
                                            colocate_with => 'hrag.nodes', force_delegation => true);
        action := 'distributed';
    ELSE
        action := 'already distributed';
    END IF;
    table_name := 'hrag.node_text(uuid, uuid)'; distribution := 'by document_id, colocated with hrag.nodes';
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION hrag.distribute(integer) IS
    'Distribute hrag over a Citus cluster: documents by id, nodes by document_id (colocated), small tables as reference tables; idempotent';
REVOKE ALL ON FUNCTION hrag.distribute(integer) FROM PUBLIC;
