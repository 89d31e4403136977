-- Revision 0025: every collection records its embedding model, since vectors
-- of two models are not comparable; hrag reembed switches a collection to
-- another model in place (reembed_documents/_nodes, finish_reembed).
-- Current definitions: hrag_pg/sql/tables.sql, reembed.sql;
-- reasoning: docs/decisions.md, "A model per collection".

CREATE TABLE hrag.collection_models (
    collection     text        NOT NULL PRIMARY KEY
                               CHECK (collection <> '' AND length(collection) <= 256),
    model          text        NOT NULL CHECK (model <> ''),
    dimension      integer     NOT NULL CHECK (dimension > 0),
    fingerprint    text        NOT NULL DEFAULT '',
    query_prompt   text        NOT NULL DEFAULT '',
    passage_prompt text        NOT NULL DEFAULT '',
    -- the cosine similarity unrelated texts have under this model, which
    -- hrag.search_hybrid reads scores above (0 for MiniLM, 0.65 for E5)
    vector_baseline real       NOT NULL DEFAULT 0 CHECK (vector_baseline >= 0 AND vector_baseline < 1),
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    -- the model an unfinished hrag reembed switches to (same keys as the columns above)
    next_model     jsonb       CHECK (next_model IS NULL OR jsonb_typeof(next_model) = 'object')
);

COMMENT ON TABLE hrag.collection_models IS
    'Per collection, the embedding model that made its vectors (and the one an unfinished reembed switches to)';

CREATE TABLE hrag.reembed_documents (
    document_id    uuid    NOT NULL PRIMARY KEY REFERENCES hrag.documents (id) ON DELETE CASCADE,
    collection     text    NOT NULL,
    fingerprint    text    NOT NULL,
    -- hrag.documents.content_hash when the new vectors were made: a document
    -- written since is prepared again before the switch
    document_hash  text    NOT NULL,
    -- what the document's hash becomes with the new model (a re-ingest then finds it unchanged)
    new_document_hash text NOT NULL,
    total_tokens   integer NOT NULL CHECK (total_tokens >= 0)
);

COMMENT ON TABLE hrag.reembed_documents IS
    'Documents whose new vectors an unfinished hrag reembed has written (hrag.reembed_nodes)';

CREATE INDEX reembed_documents_collection_idx ON hrag.reembed_documents (collection);

CREATE TABLE hrag.reembed_nodes (
    document_id    uuid    NOT NULL REFERENCES hrag.reembed_documents (document_id) ON DELETE CASCADE,
    node_id        uuid    NOT NULL,
    collection     text    NOT NULL,
    embedding      vector({{embedding_dim}}),
    token_count    integer NOT NULL CHECK (token_count >= 0),
    subtree_tokens integer NOT NULL CHECK (subtree_tokens >= 0),
    content_hash   text    NOT NULL,
    PRIMARY KEY (document_id, node_id)
);

COMMENT ON TABLE hrag.reembed_nodes IS
    'The new vector, token counts and content hash of each node of a prepared document, until hrag.finish_reembed';

ALTER TABLE hrag.collection_models ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.reembed_documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.reembed_nodes ENABLE ROW LEVEL SECURITY;

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

-- ---------------------------------------------------------------------------
-- The switch: the prepared vectors replace the old ones for a whole
-- collection at once, or nothing changes.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.finish_reembed(collection text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    target   jsonb;
    stale    bigint;
    switched bigint;
BEGIN
    -- Writers read this row FOR SHARE in their transaction: taking it FOR
    -- UPDATE waits for them, and makes those after us see the new model.
    SELECT m.next_model INTO target
      FROM hrag.collection_models m WHERE m.collection = finish_reembed.collection FOR UPDATE;
    IF target IS NULL THEN
        RAISE EXCEPTION 'hrag: collection % has no unfinished reembed to finish', finish_reembed.collection
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT count(*) INTO stale
      FROM hrag.documents d
      LEFT JOIN hrag.reembed_documents r ON r.document_id = d.id
     WHERE d.collection = finish_reembed.collection
       AND (r.document_id IS NULL OR r.document_hash <> d.content_hash
            OR r.fingerprint <> target->>'fingerprint');
    IF stale > 0 THEN
        -- (the caller prepares them and calls again)
        RAISE EXCEPTION 'hrag: % documents of collection % were written since their new vectors were made',
                        stale, finish_reembed.collection
            USING ERRCODE = 'serialization_failure';
    END IF;
    UPDATE hrag.nodes n
       SET embedding = p.embedding, token_count = p.token_count, subtree_tokens = p.subtree_tokens,
           content_hash = p.content_hash
      FROM hrag.reembed_nodes p
     WHERE p.document_id = n.document_id AND p.node_id = n.id AND n.collection = finish_reembed.collection;
    GET DIAGNOSTICS switched = ROW_COUNT;
    UPDATE hrag.documents d
       SET total_tokens = r.total_tokens, content_hash = r.new_document_hash, updated_at = now()
      FROM hrag.reembed_documents r
     WHERE r.document_id = d.id AND d.collection = finish_reembed.collection;
    UPDATE hrag.collection_models m
       SET model = target->>'model', dimension = (target->>'dimension')::integer,
           fingerprint = target->>'fingerprint', query_prompt = target->>'query_prompt',
           passage_prompt = target->>'passage_prompt',
           vector_baseline = coalesce((target->>'vector_baseline')::real, 0), recorded_at = now(), next_model = NULL
     WHERE m.collection = finish_reembed.collection;
    DELETE FROM hrag.reembed_documents r WHERE r.collection = finish_reembed.collection;
    RETURN switched;
END
$$;

COMMENT ON FUNCTION hrag.finish_reembed(text) IS
    'Swap in the vectors an unfinished reembed prepared, for the whole collection in one transaction (hrag reembed calls it)';

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


-- ---------------------------------------------------------------------------
-- The candidate stage reads vector similarity above the model's baseline.
-- ---------------------------------------------------------------------------
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
    baseline   real := 0;
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
    -- Where similarity starts to mean something under the collection's
    -- model (hrag.collection_models.vector_baseline): E5-style models put
    -- unrelated texts near 0.8 (their baseline is 0.65), MiniLM near 0.1
    -- (its baseline is 0).  The fusion reads the similarity above it,
    -- rescaled to [0, 1], so one lexical weight and one budget-mode
    -- sharpness serve models whose cosines live on different scales.
    SELECT coalesce(max(m.vector_baseline), 0) INTO baseline
      FROM hrag.collection_models m
     WHERE search_hybrid.collection IS NULL OR m.collection = search_hybrid.collection;

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
        SELECT p.*, ((1 - weight) * (p.vector_score - baseline) / (1 - baseline)
                     + weight * p.lexical_score)::real AS combined
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

