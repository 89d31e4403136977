-- hrag-pg, distribution.sql: hrag.distribute(), which converts a single-node
-- installation for Citus.  Everything else is written to run on both: keys
-- lead with document_id and the per-document steps filter on it; only what
-- Citus cannot run is changed here (docs/decisions.md, "Distributable keys;
-- Citus-only conversions happen in hrag.distribute()").
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.distribute (last changed in revision 0025)
-- Distributes the per-document tables by document_id (co-located, so a
-- document's rows share a shard) and makes the small ones reference tables;
-- replaces the policies' subqueries with _collection_visible, drops the
-- statistics triggers (the readers then sum per document) and makes
-- node_text(document_id, node_id) and the *_document steps distributed
-- functions, so each call runs on its document's worker.  Idempotent: it
-- reports what it did per table.
CREATE OR REPLACE FUNCTION hrag.distribute(shard_count integer DEFAULT NULL::integer) RETURNS TABLE(table_name text, distribution text, action text)
    LANGUAGE plpgsql
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

    -- Citus refuses to distribute a table with triggers: the statistics are
    -- the per-document rows from here on (hrag._statistics_per_document).
    PERFORM hrag._drop_statistics_triggers();
    DELETE FROM hrag.collection_terms;
    DELETE FROM hrag.collection_sizes;

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
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.collection_models'::regclass) THEN
        ALTER POLICY collection_models_by_collection ON hrag.collection_models
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
        ALTER POLICY reembed_documents_by_collection ON hrag.reembed_documents
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
        ALTER POLICY reembed_nodes_by_collection ON hrag.reembed_nodes
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
                              (5, 'hrag.document_terms', 'document_id', 'hrag.documents'),
                              (6, 'hrag.collection_models', 'reference', NULL),
                              (7, 'hrag.reembed_documents', 'document_id', 'hrag.documents'),
                              (8, 'hrag.reembed_nodes', 'document_id', 'hrag.documents'))
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
    -- delegated to the worker holding the shard of its document argument.
    FOR spec IN
        SELECT * FROM (VALUES (1, 'hrag.node_text(uuid, uuid)', 'document_id'),
                              (2, 'hrag._node_rows_document(uuid, uuid[])', 'doc'),
                              (3, 'hrag._auto_merge_document(uuid, uuid[], real[], real)', 'doc'),
                              (4, 'hrag._parents_document(uuid, uuid[], bigint[])', 'doc'),
                              (5, 'hrag._budget_candidates_document(uuid, uuid[], real[], double precision[])', 'doc'),
                              (6, 'hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean)', 'doc'))
                       AS s(ord, fn, arg)
         ORDER BY ord
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_object
                        WHERE objid = spec.fn::regprocedure
                          AND distribution_argument_index IS NOT NULL AND force_delegation) THEN
            -- force_delegation: also inside transaction blocks (every SQLAlchemy
            -- read is one) and from the coordinator's loops; safe because the
            -- function only reads its document.
            PERFORM create_distributed_function(spec.fn::regprocedure, spec.arg,
                                                colocate_with => 'hrag.nodes', force_delegation => true);
            action := 'distributed';
        ELSE
            action := 'already distributed';
        END IF;
        table_name := spec.fn; distribution := 'by ' || spec.arg || ', colocated with hrag.nodes';
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hrag.distribute(integer) IS
    'Distribute hrag over a Citus cluster: documents by id, nodes by document_id (colocated), small tables as reference tables; idempotent';
REVOKE ALL ON FUNCTION hrag.distribute(integer) FROM PUBLIC;
