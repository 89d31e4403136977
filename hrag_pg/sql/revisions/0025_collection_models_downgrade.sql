-- hrag-pg revision 0025, downgrade: collections no longer record their model.
-- Current definitions: hrag_pg/sql/tables.sql, reembed.sql.

DROP FUNCTION hrag.finish_reembed(text);

CREATE OR REPLACE FUNCTION hrag.search_hybrid(query public.vector, query_text text, k integer DEFAULT 20, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb, lexical_weight real DEFAULT 0.3, candidates integer DEFAULT NULL::integer, min_relative_score real DEFAULT NULL::real) RETURNS TABLE(node_id uuid, parent_id uuid, document_id uuid, score real, vector_score real, lexical_score real)
    LANGUAGE plpgsql STABLE ROWS 30
    AS $$
#variable_conflict use_column
DECLARE
    -- The lexical candidates are the leaves holding the question's rarest
    -- terms, as long as those terms are in at most this many leaves together.
    rare_cap   constant integer := 300;
    idfs       real[] := '{}';
    total      real := 0;
    hashes     bigint[] := '{}';
    rare       bigint[] := '{}';
    rare_df    bigint := 0;
    weight     real;
    term_row   record;
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    IF candidates IS NOT NULL THEN
        PERFORM hrag._check_count(candidates, 'candidates');
    END IF;
    candidates := greatest(coalesce(candidates, k), 30);
    IF lexical_weight IS NULL OR lexical_weight < 0 OR lexical_weight > 1 OR lexical_weight = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "lexical_weight" must be in [0, 1], got %', coalesce(lexical_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF min_relative_score IS NOT NULL AND (min_relative_score <= 0 OR min_relative_score > 1) THEN
        RAISE EXCEPTION 'hrag: argument "min_relative_score" must be in (0, 1], got %', min_relative_score
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF lexical_weight > 0 THEN
        -- rarest first: a term joins the rare set while the set stays within rare_cap leaves
        FOR term_row IN SELECT * FROM hrag._term_weights(hrag.lexical_terms(query_text), collection) LOOP
            hashes := hashes || hrag.term_hash(term_row.term);
            idfs := idfs || term_row.idf;
            total := total + term_row.idf;
            IF rare_df + term_row.df <= rare_cap THEN
                rare := rare || hashes[cardinality(hashes)];
                rare_df := rare_df + term_row.df;
            END IF;
        END LOOP;
    END IF;
    weight := CASE WHEN total > 0 THEN lexical_weight ELSE 0 END;

    RETURN QUERY
    WITH vector_hit AS (
        SELECT s.node_id, s.parent_id, s.document_id, s.score AS vector_score
          FROM hrag.search_leaves(query, candidates, collection, filter) AS s
    ),
    -- Leaves holding a rare term, through the GIN index (at most rare_cap rows).
    lexical_hit AS (
        SELECT n.id AS node_id, n.parent_id, n.document_id, n.lexical_hashes
          FROM hrag.nodes n
         WHERE cardinality(rare) > 0
           AND n.lexical_hashes && rare
           AND n.lexical_hashes IS NOT NULL
           -- (not `n.embedding IS NOT NULL`: that matches the collection index's
           -- predicate, and a generic plan then ANDs in a scan of that whole index)
           AND coalesce(n.embedding IS NOT NULL, false)
           AND (search_hybrid.collection IS NULL OR n.collection = search_hybrid.collection)
           AND (search_hybrid.filter IS NULL
                OR n.metadata @> search_hybrid.filter
                OR EXISTS (SELECT 1 FROM hrag.documents d
                            WHERE d.id = n.document_id
                              AND (d.metadata || n.metadata) @> search_hybrid.filter))
         LIMIT rare_cap
    ),
    -- Their coverage of the question's terms (IDF-weighted), compared as
    -- hashes: integers compare at a fraction of the cost of text.
    lexical_scored AS (
        SELECT l.node_id, l.parent_id, l.document_id,
               ((SELECT sum(w.idf) FROM unnest(hashes, idfs) AS w(hash, idf) WHERE w.hash = ANY (l.lexical_hashes))
                / total)::real AS lexical_score
          FROM lexical_hit l
    ),
    lexical_best AS (
        SELECT b.* FROM lexical_scored b ORDER BY b.lexical_score DESC, b.node_id LIMIT candidates
    ),
    -- The vector candidates' coverage, scored here (looking it up among the
    -- lexical rows was a nested loop over all of them for every candidate).
    vector_scored AS (
        SELECT v.node_id, v.parent_id, v.document_id, v.vector_score,
               (CASE WHEN total > 0
                     THEN coalesce((SELECT sum(w.idf) FROM unnest(hashes, idfs) AS w(hash, idf)
                                     WHERE w.hash = ANY (n.lexical_hashes)), 0) / total
                     ELSE 0 END)::real AS lexical_score
          FROM vector_hit v
          JOIN hrag.nodes n ON n.document_id = v.document_id AND n.id = v.node_id
    ),
    pool AS (
        SELECT * FROM vector_scored
        UNION ALL
        SELECT b.node_id, b.parent_id, b.document_id, (1 - (n.embedding <=> query))::real, b.lexical_score
          FROM lexical_best b
          JOIN hrag.nodes n ON n.document_id = b.document_id AND n.id = b.node_id
         WHERE NOT EXISTS (SELECT 1 FROM vector_hit v WHERE v.node_id = b.node_id)
    ),
    ranked AS (
        SELECT p.*, ((1 - weight) * p.vector_score + weight * p.lexical_score)::real AS combined
          FROM pool p
         ORDER BY combined DESC, p.node_id
         LIMIT k
    )
    SELECT r.node_id, r.parent_id, r.document_id, r.combined, r.vector_score, r.lexical_score
      FROM ranked r
     WHERE min_relative_score IS NULL
        OR r.combined >= min_relative_score * (SELECT max(b.combined) FROM ranked b)
     ORDER BY r.combined DESC, r.node_id;
END
$$;


DROP TABLE hrag.reembed_nodes;
DROP TABLE hrag.reembed_documents;
DROP TABLE hrag.collection_models;

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


CREATE OR REPLACE FUNCTION hrag.grant_reader(role_name name) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA hrag TO %I', role_name);
    EXECUTE format('GRANT SELECT ON hrag.documents, hrag.nodes, hrag.document_terms, hrag.collection_terms, '
                   'hrag.collection_sizes, hrag.config TO %I', role_name);
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
                       'hrag.collection_terms, hrag.collection_sizes TO %I', role_name);
    END IF;
END
$$;

