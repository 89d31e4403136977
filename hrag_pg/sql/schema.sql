-- hrag-pg: the head schema in one place. GENERATED: do not edit by hand.
--
-- The revision files beside this one stay the upgrade path; this file is what
-- a database migrated to head contains: pg_dump 18 --schema-only
-- --schema=hrag --no-owner (privileges kept), embedding dimension 384.
-- After adding a revision, regenerate it with `python -m hrag_pg.schema_dump`
-- (or `make schema`). Applying it to an empty database gives the same catalog
-- as migrating (tests/migration/test_schema_file.py); the hrag.config row and
-- the Alembic version number are data, written by the migrations.

-- pgvector lives outside schema hrag, so pg_dump --schema=hrag does not list it.
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

-- pg_dump orders functions before the tables their bodies read.
SET check_function_bodies = false;

-- SCHEMA: hrag
CREATE SCHEMA hrag;

-- COMMENT: SCHEMA hrag
COMMENT ON SCHEMA hrag IS 'hrag-pg: hierarchical retrieval (parent-child, auto-merging)';

-- FUNCTION: _add_collection_sizes(text[], bigint[], bigint[])
CREATE FUNCTION hrag._add_collection_sizes(collections text[], targets bigint[], tokens bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    BEGIN
        WITH change AS (
            SELECT c.collection, sum(c.targets) AS targets, sum(c.tokens) AS tokens
              FROM unnest(collections, targets, tokens) AS c(collection, targets, tokens)
             GROUP BY c.collection
        ),
        folded AS (
            DELETE FROM hrag.collection_sizes s
             WHERE s.ctid = ANY (ARRAY(
                       SELECT f.ctid FROM hrag.collection_sizes f
                        WHERE f.collection IN (SELECT c.collection FROM change c)
                          FOR UPDATE SKIP LOCKED))
            RETURNING s.collection, s.search_targets, s.total_tokens
        )
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
        SELECT x.collection, sum(x.targets), sum(x.tokens)
          FROM (SELECT * FROM change UNION ALL SELECT * FROM folded) AS x
         GROUP BY x.collection
        HAVING sum(x.targets) <> 0 OR sum(x.tokens) <> 0;
    EXCEPTION WHEN serialization_failure THEN
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
        SELECT c.collection, sum(c.targets), sum(c.tokens)
          FROM unnest(collections, targets, tokens) AS c(collection, targets, tokens)
         GROUP BY c.collection
        HAVING sum(c.targets) <> 0 OR sum(c.tokens) <> 0;
    END;
END
$$;

-- COMMENT: FUNCTION _add_collection_sizes(collections text[], targets bigint[], tokens bigint[])
COMMENT ON FUNCTION hrag._add_collection_sizes(collections text[], targets bigint[], tokens bigint[]) IS 'internal: add signed changes to hrag.collection_sizes, folding the changed collections'' free rows, not part of the API';

-- FUNCTION: _add_term_counts(text[], text[], bigint[])
CREATE FUNCTION hrag._add_term_counts(collections text[], terms text[], changes bigint[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    BEGIN
        WITH change AS (
            SELECT c.collection, c.term, sum(c.leaves) AS leaves
              FROM unnest(collections, terms, changes) AS c(collection, term, leaves)
             GROUP BY c.collection, c.term
        ),
        -- the rows of those terms no other transaction holds (one being folded
        -- elsewhere stays, and so does what that transaction inserts)
        folded AS (
            DELETE FROM hrag.collection_terms t
             WHERE t.ctid = ANY (ARRAY(
                       SELECT f.ctid FROM hrag.collection_terms f
                        WHERE (f.term, f.collection) IN (SELECT c.term, c.collection FROM change c)
                          FOR UPDATE SKIP LOCKED))
            RETURNING t.collection, t.term, t.leaves
        )
        INSERT INTO hrag.collection_terms (collection, term, leaves)
        SELECT x.collection, x.term, sum(x.leaves)
          FROM (SELECT * FROM change UNION ALL SELECT * FROM folded) AS x
         GROUP BY x.collection, x.term
        HAVING sum(x.leaves) <> 0;
    EXCEPTION WHEN serialization_failure THEN
        -- (REPEATABLE READ or SERIALIZABLE: a row folded by a transaction that
        -- committed since this one began cannot be locked; the change alone)
        INSERT INTO hrag.collection_terms (collection, term, leaves)
        SELECT c.collection, c.term, sum(c.leaves)
          FROM unnest(collections, terms, changes) AS c(collection, term, leaves)
         GROUP BY c.collection, c.term
        HAVING sum(c.leaves) <> 0;
    END;
END
$$;

-- COMMENT: FUNCTION _add_term_counts(collections text[], terms text[], changes bigint[])
COMMENT ON FUNCTION hrag._add_term_counts(collections text[], terms text[], changes bigint[]) IS 'internal: add signed changes to hrag.collection_terms, folding the changed terms'' free rows, not part of the API';

-- FUNCTION: _auto_merge_document(uuid, uuid[], real[], real)
CREATE FUNCTION hrag._auto_merge_document(doc uuid, node_ids uuid[], scores real[], merge_threshold real) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        WITH RECURSIVE
        -- A duplicate id keeps its best score; unknown ids drop out at the first join.
        hit AS (
            SELECT h.id, max(h.score) AS score
              FROM unnest(node_ids, scores) AS h(id, score)
             GROUP BY h.id
        ),
        -- Every hit's path to its root, by primary key: the only nodes the merge can touch.
        chain AS (
            SELECT hit.id AS hit, hit.score, n.id AS node, n.document_id, n.parent_id, n.depth, n.child_count,
                   0 AS steps
              FROM hit
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = hit.id
            UNION ALL
            SELECT c.hit, c.score, p.id, p.document_id, p.parent_id, p.depth, p.child_count, c.steps + 1
              FROM chain c
              JOIN hrag.nodes p ON p.document_id = coalesce(doc, c.document_id) AND p.id = c.parent_id
        ),
        cand AS MATERIALIZED (
            SELECT DISTINCT c.node AS id, c.parent_id, c.depth, c.child_count FROM chain c
        ),
        -- Bottom-up, one row per level: the parents of the nodes at `level` are
        -- decided once their children are final; a merged parent is covered.
        state AS (
            SELECT (SELECT max(cand.depth) FROM cand) AS level,
                   ARRAY(SELECT DISTINCT chain.hit FROM chain) AS covered,
                   '{}'::uuid[] AS merged,
                   '{}'::real[] AS ratios
            UNION ALL
            SELECT s.level - 1,
                   s.covered || coalesce(step.ids, '{}'),
                   s.merged || coalesce(step.ids, '{}'),
                   s.ratios || coalesce(step.ratios, '{}')
              FROM state s
              CROSS JOIN LATERAL (
                  SELECT array_agg(g.parent_id) AS ids, array_agg(g.ratio) AS ratios
                    FROM (SELECT c.parent_id, count(*)::real / max(p.child_count)::real AS ratio
                            FROM cand c
                            JOIN cand p ON p.id = c.parent_id
                           WHERE c.depth = s.level
                             AND c.id = ANY (s.covered)
                             AND p.child_count > 0
                           GROUP BY c.parent_id) AS g
                   WHERE g.ratio >= merge_threshold
              ) AS step
             WHERE s.level > 0
        ),
        final AS (
            SELECT s.covered, s.merged, s.ratios FROM state s ORDER BY s.level NULLS FIRST LIMIT 1
        ),
        -- Each hit ends up in the topmost covered node on its path; those nodes
        -- are the result, and the hits below them are what they absorbed.
        placed AS (
            SELECT DISTINCT ON (c.hit) c.hit, c.score, c.node AS top, c.document_id
              FROM chain c, final f
             WHERE c.node = ANY (f.covered)
             ORDER BY c.hit, c.steps DESC
        ),
        result AS (
            SELECT pl.top, pl.document_id,
                   max(pl.score) AS score,
                   coalesce(array_agg(pl.hit ORDER BY pl.score DESC, pl.hit) FILTER (WHERE pl.hit <> pl.top), '{}')
                       AS merged_from
              FROM placed pl
             GROUP BY pl.top, pl.document_id
        )
        SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, r.score, r.merged_from,
               (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top)
                   AS hit_ratio,
               n.subtree_tokens
          FROM result r
          JOIN hrag.nodes n ON n.document_id = coalesce(doc, r.document_id) AND n.id = r.top
    LOOP
        node_id := x.id;
        document_id := x.document_id;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
        score := x.score;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        RETURN NEXT;
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _auto_merge_document(doc uuid, node_ids uuid[], scores real[], merge_threshold real)
COMMENT ON FUNCTION hrag._auto_merge_document(doc uuid, node_ids uuid[], scores real[], merge_threshold real) IS 'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the recursive auto-merge of one document''s hits, not part of the API';

-- FUNCTION: _auto_merge_each(uuid[], uuid[], real[], real)
CREATE FUNCTION hrag._auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
DECLARE
    this_doc   uuid;
    doc_ids    uuid[];
    doc_scores real[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN h.doc END
                      FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord) INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._auto_merge_document(this_doc, doc_ids, doc_scores, merge_threshold);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
COMMENT ON FUNCTION hrag._auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real) IS 'internal: hrag._auto_merge_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';

-- FUNCTION: _auto_merge_ranked(uuid[], uuid[], real[], real)
CREATE FUNCTION hrag._auto_merge_ranked(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    PERFORM hrag._check_threshold(merge_threshold);
    RETURN QUERY
    SELECT m.node_id, m.document_id, m.depth, m.title, m.heading_path, m.content, m.score, m.merged_from,
           m.hit_ratio, (row_number() OVER (ORDER BY m.score DESC, m.depth, m.node_id))::integer, m.token_count
      FROM hrag._auto_merge_each(node_ids, document_ids, scores, merge_threshold) AS m
     ORDER BY m.score DESC, m.depth, m.node_id;
END
$$;

-- COMMENT: FUNCTION _auto_merge_ranked(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
COMMENT ON FUNCTION hrag._auto_merge_ranked(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real) IS 'internal: the auto-merge of hits with their documents, in rank order, not part of the API';

-- FUNCTION: _budget_candidates_document(uuid, uuid[], real[], double precision[])
CREATE FUNCTION hrag._budget_candidates_document(doc uuid, node_ids uuid[], scores real[], weights double precision[]) RETURNS TABLE(node_id uuid, document_id uuid, evidence double precision, best real, hits bigint, children_hit bigint, seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
    LANGUAGE plpgsql STABLE ROWS 100
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE
    -- every hit's path to its root; `via` is the child the climb came from
    -- (the node's own columns ride along, so the candidates need no second lookup)
    chain AS (
        SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.document_id, n.parent_id, NULL::uuid AS via,
               n.seq, n.subtree_end, n.subtree_tokens, n.child_count, n.depth
          FROM unnest(node_ids, scores, weights) AS w(id, score, weight)
          JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = w.id
        UNION ALL
        SELECT c.hit, c.score, c.weight, p.id, p.document_id, p.parent_id, c.node,
               p.seq, p.subtree_end, p.subtree_tokens, p.child_count, p.depth
          FROM chain c
          JOIN hrag.nodes p ON p.document_id = coalesce(doc, c.document_id) AND p.id = c.parent_id
    )
    -- (the evidence summed in hit order: the same float whatever the grouping)
    SELECT c.node, c.document_id, sum(c.weight ORDER BY c.hit), max(c.score), count(*), count(DISTINCT c.via),
           c.seq, c.subtree_end, c.subtree_tokens, c.child_count, c.depth
      FROM chain c
     GROUP BY c.node, c.document_id, c.seq, c.subtree_end, c.subtree_tokens, c.child_count, c.depth;
END
$$;

-- COMMENT: FUNCTION _budget_candidates_document(doc uuid, node_ids uuid[], scores real[], weights double precision[])
COMMENT ON FUNCTION hrag._budget_candidates_document(doc uuid, node_ids uuid[], scores real[], weights double precision[]) IS 'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the budget mode''s candidates on the hits'' paths, not part of the API';

-- FUNCTION: _budget_candidates_each(uuid[], uuid[], real[], double precision[])
CREATE FUNCTION hrag._budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[], weights double precision[]) RETURNS TABLE(node_id uuid, document_id uuid, evidence double precision, best real, hits bigint, children_hit bigint, seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
    LANGUAGE plpgsql STABLE ROWS 100
    AS $$
DECLARE
    this_doc    uuid;
    doc_ids     uuid[];
    doc_scores  real[];
    doc_weights double precision[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN h.doc END
                      FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord), array_agg(h.weight ORDER BY h.ord)
          INTO doc_ids, doc_scores, doc_weights
          FROM unnest(node_ids, document_ids, scores, weights) WITH ORDINALITY AS h(id, doc, score, weight, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._budget_candidates_document(this_doc, doc_ids, doc_scores, doc_weights);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[], weights double precision[])
COMMENT ON FUNCTION hrag._budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[], weights double precision[]) IS 'internal: hrag._budget_candidates_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';

-- FUNCTION: _budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean)
CREATE FUNCTION hrag._budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], picked_children integer[], node_ids uuid[], scores real[], over_budget boolean) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        WITH hit AS (
            SELECT n.id, n.document_id, n.seq, max(h.score) AS score
              FROM unnest(node_ids, scores) AS h(id, score)
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = h.id
             GROUP BY n.id, n.document_id, n.seq
        ),
        picked AS (
            SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens,
                   n.child_count, pk.why, pk.children_hit
              FROM unnest(picked_ids, picked_why, picked_children) AS pk(id, why, children_hit)
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = pk.id
        ),
        -- the hits inside each picked node
        absorbed AS (
            SELECT p.id,
                   max(hit.score) AS best,
                   coalesce(array_agg(hit.id ORDER BY hit.score DESC, hit.id) FILTER (WHERE hit.id <> p.id), '{}')
                       AS merged_from,
                   count(*) AS hits_inside
              FROM picked p
              JOIN hit ON hit.document_id = p.document_id AND hit.seq BETWEEN p.seq AND p.subtree_end
             GROUP BY p.id
        )
        SELECT p.id, p.document_id, p.depth, p.title, p.heading_path, p.seq, p.subtree_end,
               a.best::real AS best, a.merged_from,
               CASE WHEN p.child_count > 0 THEN (p.children_hit::real / p.child_count)::real END AS hit_ratio,
               p.subtree_tokens,
               CASE WHEN over_budget THEN p.why
                    WHEN p.why = 'hit' THEN 'direct hit'
                    ELSE format('%s of %s children hit, %s hits inside', p.children_hit, p.child_count, a.hits_inside)
               END AS reason
          FROM picked p
          JOIN absorbed a ON a.id = p.id
    LOOP
        node_id := x.id;
        document_id := x.document_id;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
        score := x.best;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        reason := x.reason;
        RETURN NEXT;
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], picked_children integer[], node_ids uuid[], scores real[], over_budget boolean)
COMMENT ON FUNCTION hrag._budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], picked_children integer[], node_ids uuid[], scores real[], over_budget boolean) IS 'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the chosen nodes with what they absorbed, not part of the API';

-- FUNCTION: _budget_rows_each(uuid[], uuid[], text[], integer[], uuid[], uuid[], real[], boolean)
CREATE FUNCTION hrag._budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[], picked_children integer[], node_ids uuid[], document_ids uuid[], scores real[], over_budget boolean) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
DECLARE
    this_doc     uuid;
    doc_picked   uuid[];
    doc_why      text[];
    doc_children integer[];
    doc_ids      uuid[];
    doc_scores   real[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN p.doc END
                      FROM unnest(picked_docs) AS p(doc) WHERE p.doc IS NOT NULL LOOP
        SELECT array_agg(p.id ORDER BY p.ord), array_agg(p.why ORDER BY p.ord), array_agg(p.children ORDER BY p.ord)
          INTO doc_picked, doc_why, doc_children
          FROM unnest(picked_ids, picked_docs, picked_why, picked_children)
               WITH ORDINALITY AS p(id, doc, why, children, ord)
         WHERE p.doc = coalesce(this_doc, p.doc);
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.score ORDER BY h.ord), '{}')
          INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._budget_rows_document(this_doc, doc_picked, doc_why, doc_children, doc_ids,
                                                              doc_scores, over_budget);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[], picked_children integer[], node_ids uuid[], document_ids uuid[], scores real[], over_budget boolean)
COMMENT ON FUNCTION hrag._budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[], picked_children integer[], node_ids uuid[], document_ids uuid[], scores real[], over_budget boolean) IS 'internal: hrag._budget_rows_document for each document of the chosen nodes on Citus, once for all of them elsewhere, not part of the API';

-- FUNCTION: _check_count(integer, text, integer)
CREATE FUNCTION hrag._check_count(value integer, name text, max_value integer DEFAULT 1000) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF value IS NULL OR value <= 0 OR value > max_value THEN
        RAISE EXCEPTION 'hrag: argument "%" must be between 1 and %, got %', name, max_value, coalesce(value::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- COMMENT: FUNCTION _check_count(value integer, name text, max_value integer)
COMMENT ON FUNCTION hrag._check_count(value integer, name text, max_value integer) IS 'internal: argument check, not part of the API';

-- FUNCTION: _check_hits(uuid[], real[])
CREATE FUNCTION hrag._check_hits(node_ids uuid[], scores real[]) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF node_ids IS NULL OR scores IS NULL THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" and "scores" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(node_ids) <> cardinality(scores) THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" (% elements) and "scores" (% elements) must have the same length',
            cardinality(node_ids), cardinality(scores)
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF array_position(node_ids, NULL) IS NOT NULL OR array_position(scores, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" and "scores" must not contain NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN true;
END
$$;

-- COMMENT: FUNCTION _check_hits(node_ids uuid[], scores real[])
COMMENT ON FUNCTION hrag._check_hits(node_ids uuid[], scores real[]) IS 'internal: argument check, not part of the API';

-- FUNCTION: _check_query(public.vector, jsonb)
CREATE FUNCTION hrag._check_query(query public.vector, filter jsonb) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF query IS NULL THEN
        RAISE EXCEPTION 'hrag: argument "query" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query) <> 384 THEN
        RAISE EXCEPTION 'hrag: argument "query" has % dimensions, but this installation stores % (hrag.config.embedding_dim)',
            vector_dims(query), 384
            USING ERRCODE = 'data_exception';
    END IF;
    IF vector_norm(query) = 0 THEN
        RAISE EXCEPTION 'hrag: argument "query" is the zero vector; cosine similarity is undefined for it'
            USING ERRCODE = 'data_exception';
    END IF;
    IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'hrag: argument "filter" must be a JSON object, got a JSON %', jsonb_typeof(filter)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

-- COMMENT: FUNCTION _check_query(query public.vector, filter jsonb)
COMMENT ON FUNCTION hrag._check_query(query public.vector, filter jsonb) IS 'internal: argument check, not part of the API';

-- FUNCTION: _check_threshold(real)
CREATE FUNCTION hrag._check_threshold(merge_threshold real) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$
BEGIN
    IF merge_threshold IS NULL OR merge_threshold <= 0 OR merge_threshold > 1 OR merge_threshold = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "merge_threshold" must be in (0, 1], got %', coalesce(merge_threshold::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN true;
END
$$;

-- COMMENT: FUNCTION _check_threshold(merge_threshold real)
COMMENT ON FUNCTION hrag._check_threshold(merge_threshold real) IS 'internal: argument check, not part of the API';

-- FUNCTION: _collection_size(text[])
CREATE FUNCTION hrag._collection_size(collections text[], OUT search_targets bigint, OUT total_tokens bigint) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF hrag._statistics_per_document() THEN
        -- Citus: a sum over the documents, on the shards
        SELECT coalesce(sum(d.search_targets), 0), coalesce(sum(d.total_tokens), 0)
          INTO search_targets, total_tokens
          FROM hrag.documents d
         WHERE collections IS NULL OR d.collection = ANY (collections);
    ELSE
        SELECT coalesce(sum(s.search_targets), 0), coalesce(sum(s.total_tokens), 0)
          INTO search_targets, total_tokens
          FROM hrag.collection_sizes s
         WHERE collections IS NULL OR s.collection = ANY (collections);
    END IF;
END
$$;

-- COMMENT: FUNCTION _collection_size(collections text[], OUT search_targets bigint, OUT total_tokens bigint)
COMMENT ON FUNCTION hrag._collection_size(collections text[], OUT search_targets bigint, OUT total_tokens bigint) IS 'internal: search targets and stored tokens of collections (NULL: all visible), not part of the API';

-- FUNCTION: _collection_visible(text)
CREATE FUNCTION hrag._collection_visible(collection text) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT v IS NULL OR _collection_visible.collection = ANY (v)
      FROM (SELECT hrag.visible_collections() AS v) AS t
$$;

-- COMMENT: FUNCTION _collection_visible(collection text)
COMMENT ON FUNCTION hrag._collection_visible(collection text) IS 'internal: may the current user see this collection; the RLS policies call it on Citus (no subqueries there)';

-- FUNCTION: _create_vector_index()
CREATE FUNCTION hrag._create_vector_index() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    CREATE INDEX nodes_embedding_hnsw_idx ON hrag.nodes
        USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
END
$$;

-- COMMENT: FUNCTION _create_vector_index()
COMMENT ON FUNCTION hrag._create_vector_index() IS 'internal: the HNSW index definition, not part of the API';

-- FUNCTION: _document_ids(uuid[])
CREATE FUNCTION hrag._document_ids(node_ids uuid[]) RETURNS uuid[]
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    found_ids  uuid[];
    found_docs uuid[];
BEGIN
    SELECT array_agg(n.id), array_agg(n.document_id) INTO found_ids, found_docs
      FROM hrag.nodes n
     WHERE n.id = ANY (node_ids);
    RETURN ARRAY(SELECT (SELECT f.doc FROM unnest(found_ids, found_docs) AS f(id, doc)
                          WHERE f.id = h.id ORDER BY f.doc LIMIT 1)
                   FROM unnest(node_ids) WITH ORDINALITY AS h(id, ord)
                  ORDER BY h.ord);
END
$$;

-- COMMENT: FUNCTION _document_ids(node_ids uuid[])
COMMENT ON FUNCTION hrag._document_ids(node_ids uuid[]) IS 'internal: the document of each node id (NULL if unknown), not part of the API';

-- FUNCTION: _document_terms_changed()
CREATE FUNCTION hrag._document_terms_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    c text[];
    t text[];
    n bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hrag.collection_terms;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(r.leaves::bigint) INTO c, t, n
          FROM new_rows r;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(-r.leaves::bigint) INTO c, t, n
          FROM old_rows r;
    ELSE
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(r.leaves) INTO c, t, n
          FROM (SELECT x.collection, x.term, x.leaves::bigint AS leaves FROM new_rows x
                UNION ALL
                SELECT x.collection, x.term, -x.leaves::bigint FROM old_rows x) AS r;
    END IF;
    IF c IS NOT NULL THEN
        PERFORM hrag._add_term_counts(c, t, n);
    END IF;
    RETURN NULL;
END
$$;

-- COMMENT: FUNCTION _document_terms_changed()
COMMENT ON FUNCTION hrag._document_terms_changed() IS 'internal: the trigger keeping hrag.collection_terms, not part of the API';

-- FUNCTION: _documents_changed()
CREATE FUNCTION hrag._documents_changed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    c  text[];
    n  bigint[];
    tk bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hrag.collection_sizes;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.collection), array_agg(r.search_targets::bigint), array_agg(r.total_tokens::bigint)
          INTO c, n, tk
          FROM new_rows r WHERE r.search_targets <> 0 OR r.total_tokens <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.collection), array_agg(-r.search_targets::bigint), array_agg(-r.total_tokens::bigint)
          INTO c, n, tk
          FROM old_rows r WHERE r.search_targets <> 0 OR r.total_tokens <> 0;
    ELSE
        -- (most updates of a document change neither count: nothing to add)
        SELECT array_agg(r.collection), array_agg(r.targets), array_agg(r.tokens) INTO c, n, tk
          FROM (SELECT x.collection, sum(x.targets) AS targets, sum(x.tokens) AS tokens
                  FROM (SELECT y.collection, y.search_targets::bigint AS targets, y.total_tokens::bigint AS tokens
                          FROM new_rows y
                        UNION ALL
                        SELECT y.collection, -y.search_targets::bigint, -y.total_tokens::bigint FROM old_rows y) AS x
                 GROUP BY x.collection
                HAVING sum(x.targets) <> 0 OR sum(x.tokens) <> 0) AS r;
    END IF;
    IF c IS NOT NULL THEN
        PERFORM hrag._add_collection_sizes(c, n, tk);
    END IF;
    RETURN NULL;
END
$$;

-- COMMENT: FUNCTION _documents_changed()
COMMENT ON FUNCTION hrag._documents_changed() IS 'internal: the trigger keeping hrag.collection_sizes, not part of the API';

-- FUNCTION: _drop_invalid_vector_indexes()
CREATE FUNCTION hrag._drop_invalid_vector_indexes() RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    name text;
BEGIN
    FOR name IN
        SELECT ic.oid::regclass::text
          FROM pg_catalog.pg_index i
          JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
          JOIN pg_catalog.pg_am am ON am.oid = ic.relam
         WHERE i.indrelid = 'hrag.nodes'::regclass AND am.amname = 'hnsw'
           AND NOT (i.indisvalid AND i.indisready)
    LOOP
        EXECUTE format('DROP INDEX %s', name);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _drop_invalid_vector_indexes()
COMMENT ON FUNCTION hrag._drop_invalid_vector_indexes() IS 'internal: used by repair_integrity, not part of the API';

-- FUNCTION: _drop_statistics_triggers()
CREATE FUNCTION hrag._drop_statistics_triggers() RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    terms_distributed     boolean := false;
    documents_distributed boolean := false;
BEGIN
    -- (a distributed table has none of them, and Citus refuses DROP TRIGGER on one)
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        terms_distributed := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                      WHERE logicalrelid = 'hrag.document_terms'::regclass);
        documents_distributed := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                          WHERE logicalrelid = 'hrag.documents'::regclass);
    END IF;
    IF NOT terms_distributed THEN
        DROP TRIGGER IF EXISTS document_terms_inserted ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_deleted ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_updated ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_truncated ON hrag.document_terms;
    END IF;
    IF NOT documents_distributed THEN
        DROP TRIGGER IF EXISTS documents_inserted ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_deleted ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_updated ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_truncated ON hrag.documents;
    END IF;
END
$$;

-- COMMENT: FUNCTION _drop_statistics_triggers()
COMMENT ON FUNCTION hrag._drop_statistics_triggers() IS 'internal: drop the triggers that keep the per-collection statistics (not those of a distributed table), not part of the API';

-- FUNCTION: _ef_search(integer)
CREATE FUNCTION hrag._ef_search(k integer) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    floor_depth double precision := hrag._setting('hrag.ef_search', 100);
BEGIN
    -- (pgvector accepts 1 to 1000)
    IF floor_depth < 1 OR floor_depth > 1000 OR floor_depth <> trunc(floor_depth) THEN
        RAISE EXCEPTION 'hrag: setting hrag.ef_search must be a whole number between 1 and 1000, got %', floor_depth
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- (hnsw.ef_search exists once pgvector is loaded in this session; 40 is its default)
    RETURN least(greatest(coalesce(nullif(current_setting('hnsw.ef_search', true), '')::integer, 40),
                          k, floor_depth::integer), 1000);
END
$$;

-- COMMENT: FUNCTION _ef_search(k integer)
COMMENT ON FUNCTION hrag._ef_search(k integer) IS 'internal: the HNSW search depth for k hits, max(hnsw.ef_search, k, hrag.ef_search (default 100)), not part of the API';

-- FUNCTION: _fit_budget(uuid[], integer[], uuid[], uuid[], real[], integer[], integer)
CREATE FUNCTION hrag._fit_budget(result_ids uuid[], result_tokens integer[], hit_ids uuid[], hit_docs uuid[], hit_scores real[], hit_owner integer[], max_tokens integer) RETURNS TABLE(step integer, owner integer, kept text, node_id uuid, document_id uuid, title text, heading_path text[], content text, merged_from uuid[], hit_ratio real, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    used integer := 0;
    part record;
BEGIN
    IF max_tokens IS NULL OR max_tokens < 1 OR max_tokens > 100000 THEN
        RAISE EXCEPTION 'hrag: argument "max_tokens" must be between 1 and 100000, got %',
            coalesce(max_tokens::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    step := 0;
    FOR i IN 1 .. coalesce(cardinality(result_ids), 0) LOOP
        step := step + 1;
        owner := i;
        node_id := result_ids[i];
        document_id := NULL; title := NULL; heading_path := NULL; content := NULL;
        merged_from := NULL; hit_ratio := NULL; token_count := NULL; reason := NULL;
        IF used + result_tokens[i] <= max_tokens THEN
            used := used + result_tokens[i];
            kept := 'whole';
            RETURN NEXT;
            CONTINUE;
        END IF;
        kept := 'dropped';
        RETURN NEXT;
        CONTINUE WHEN used >= max_tokens OR NOT (i = ANY (hit_owner));
        FOR part IN
            SELECT r.*
              FROM hrag._retrieve_hits(
                       ARRAY(SELECT h.id FROM unnest(hit_ids, hit_owner) WITH ORDINALITY AS h(id, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       ARRAY(SELECT h.doc FROM unnest(hit_docs, hit_owner) WITH ORDINALITY AS h(doc, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       ARRAY(SELECT h.score FROM unnest(hit_scores, hit_owner) WITH ORDINALITY AS h(score, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       max_tokens - used) AS r
             ORDER BY r.rank
        LOOP
            CONTINUE WHEN used + part.token_count > max_tokens;  -- (the best hit alone, over budget)
            used := used + part.token_count;
            step := step + 1;
            kept := 'part';
            node_id := part.node_id;
            document_id := part.document_id;
            title := part.title;
            heading_path := part.heading_path;
            content := part.content;
            merged_from := part.merged_from;
            hit_ratio := part.hit_ratio;
            token_count := part.token_count;
            reason := part.reason;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _fit_budget(result_ids uuid[], result_tokens integer[], hit_ids uuid[], hit_docs uuid[], hit_scores real[], hit_owner integer[], max_tokens integer)
COMMENT ON FUNCTION hrag._fit_budget(result_ids uuid[], result_tokens integer[], hit_ids uuid[], hit_docs uuid[], hit_scores real[], hit_owner integer[], max_tokens integer) IS 'internal: a parent-child or auto-merge context within max_tokens, not part of the API';

-- FUNCTION: _is_member_of(name)
CREATE FUNCTION hrag._is_member_of(role_name name) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce((SELECT pg_catalog.pg_has_role(current_user, r.oid, 'MEMBER')
                       FROM pg_catalog.pg_roles r WHERE r.rolname = _is_member_of.role_name), false)
$$;

-- COMMENT: FUNCTION _is_member_of(role_name name)
COMMENT ON FUNCTION hrag._is_member_of(role_name name) IS 'internal: is the current user a member of this role (false for a dropped role); a policy helper without subqueries';

-- FUNCTION: _keep_collection_statistics()
CREATE FUNCTION hrag._keep_collection_statistics() RETURNS void
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF hrag._statistics_per_document() THEN
        RETURN;
    END IF;
    PERFORM hrag._drop_statistics_triggers();
    -- no writer may change the documents between the counting and the triggers
    LOCK TABLE hrag.documents, hrag.document_terms IN SHARE MODE;
    DELETE FROM hrag.collection_terms;
    DELETE FROM hrag.collection_sizes;
    INSERT INTO hrag.collection_terms (collection, term, leaves)
    SELECT t.collection, t.term, sum(t.leaves) FROM hrag.document_terms t GROUP BY t.collection, t.term;
    INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
    SELECT d.collection, sum(d.search_targets), sum(d.total_tokens) FROM hrag.documents d GROUP BY d.collection;
    CREATE TRIGGER document_terms_inserted AFTER INSERT ON hrag.document_terms
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_deleted AFTER DELETE ON hrag.document_terms
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_updated AFTER UPDATE ON hrag.document_terms
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_truncated AFTER TRUNCATE ON hrag.document_terms
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER documents_inserted AFTER INSERT ON hrag.documents
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_deleted AFTER DELETE ON hrag.documents
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_updated AFTER UPDATE ON hrag.documents
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_truncated AFTER TRUNCATE ON hrag.documents
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
END
$$;

-- COMMENT: FUNCTION _keep_collection_statistics()
COMMENT ON FUNCTION hrag._keep_collection_statistics() IS 'internal: count the collections'' statistics afresh and (re)create the triggers that keep them (not on Citus), not part of the API';

-- FUNCTION: _node_rows_document(uuid, uuid[])
CREATE FUNCTION hrag._node_rows_document(doc uuid, node_ids uuid[]) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, token_count integer, child_count integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens,
               n.child_count
          FROM hrag.nodes n
         WHERE n.document_id = coalesce(doc, n.document_id) AND n.id = ANY (node_ids)
    LOOP
        node_id := x.id;
        document_id := x.document_id;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
        token_count := x.subtree_tokens;
        child_count := x.child_count;
        RETURN NEXT;
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _node_rows_document(doc uuid, node_ids uuid[])
COMMENT ON FUNCTION hrag._node_rows_document(doc uuid, node_ids uuid[]) IS 'internal: per document (one shard on Citus; doc NULL: every document of the nodes), nodes with their full text, not part of the API';

-- FUNCTION: _node_rows_each(uuid[], uuid[])
CREATE FUNCTION hrag._node_rows_each(node_ids uuid[], document_ids uuid[]) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, token_count integer, child_count integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN h.doc END
                      FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        doc_ids := ARRAY(SELECT h.id FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
                          WHERE h.doc = coalesce(this_doc, h.doc) ORDER BY h.ord);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._node_rows_document(this_doc, doc_ids);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _node_rows_each(node_ids uuid[], document_ids uuid[])
COMMENT ON FUNCTION hrag._node_rows_each(node_ids uuid[], document_ids uuid[]) IS 'internal: hrag._node_rows_document for each document of the nodes on Citus, once for all of them elsewhere, not part of the API';

-- FUNCTION: _parent_child_hits(uuid[], uuid[], real[], integer, integer)
CREATE FUNCTION hrag._parent_child_hits(node_ids uuid[], document_ids uuid[], scores real[], max_parents integer, top_k_children integer) RETURNS TABLE(node_id uuid, document_id uuid, title text, heading_path text[], content text, score real, matched_children uuid[], rank integer, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
#variable_conflict use_column
DECLARE
    parent    record;
    hit_ord    bigint[];
    hit_parent uuid[];
    hit_doc    uuid[];
    hit_seq    integer[];
    hit_end    integer[];
    kept_ids  uuid[] := '{}';
    kept_doc  uuid[] := '{}';
    kept_seq  integer[] := '{}';
    kept_end  integer[] := '{}';
    clashes  boolean;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    PERFORM hrag._check_count(max_parents, 'max_parents');
    IF top_k_children IS NOT NULL THEN
        PERFORM hrag._check_count(top_k_children, 'top_k_children');
    END IF;

    -- each hit's parent, per document (unknown ids and roots have none)
    SELECT coalesce(array_agg(m.ord), '{}'), coalesce(array_agg(m.parent_id), '{}'),
           coalesce(array_agg(m.document_id), '{}'), coalesce(array_agg(m.seq), '{}'),
           coalesce(array_agg(m.subtree_end), '{}')
      INTO hit_ord, hit_parent, hit_doc, hit_seq, hit_end
      FROM hrag._parents_each(node_ids, document_ids) AS m;

    FOR parent IN
        SELECT m.parent_id, min(m.ord) AS first_seen, m.document_id, m.seq, m.subtree_end
          FROM unnest(hit_ord, hit_parent, hit_doc, hit_seq, hit_end)
               AS m(ord, parent_id, document_id, seq, subtree_end)
         GROUP BY m.parent_id, m.document_id, m.seq, m.subtree_end
         ORDER BY first_seen
    LOOP
        clashes := false;
        FOR i IN 1 .. cardinality(kept_ids) LOOP
            IF kept_doc[i] = parent.document_id
               AND (parent.seq BETWEEN kept_seq[i] AND kept_end[i] OR kept_seq[i] BETWEEN parent.seq AND parent.subtree_end) THEN
                clashes := true;
                EXIT;
            END IF;
        END LOOP;
        CONTINUE WHEN clashes;
        kept_ids := kept_ids || parent.parent_id;
        kept_doc := kept_doc || parent.document_id;
        kept_seq := kept_seq || parent.seq;
        kept_end := kept_end || parent.subtree_end;
        EXIT WHEN cardinality(kept_ids) >= max_parents;
    END LOOP;

    RETURN QUERY
    WITH hit AS (
        SELECT h.id, h.score, h.ord, m.parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN unnest(hit_ord, hit_parent) AS m(ord, parent_id) ON m.ord = h.ord
    ),
    first_hit AS (
        SELECT hit.*, min(hit.ord) OVER (PARTITION BY hit.parent_id) AS first_seen
          FROM hit
         WHERE hit.parent_id = ANY (kept_ids)
    ),
    picked AS (
        SELECT f.parent_id,
               min(f.first_seen) AS first_seen,
               max(f.score) FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS best,
               array_agg(f.id ORDER BY f.ord)
                   FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS matched
          FROM first_hit f
         GROUP BY f.parent_id
    )
    SELECT p.node_id, p.document_id, p.title, p.heading_path, p.content,
           picked.best, picked.matched,
           (row_number() OVER (ORDER BY picked.first_seen))::integer,
           p.token_count
      FROM picked
      JOIN hrag._node_rows_each(kept_ids, kept_doc) AS p ON p.node_id = picked.parent_id
     ORDER BY picked.first_seen;
END
$$;

-- COMMENT: FUNCTION _parent_child_hits(node_ids uuid[], document_ids uuid[], scores real[], max_parents integer, top_k_children integer)
COMMENT ON FUNCTION hrag._parent_child_hits(node_ids uuid[], document_ids uuid[], scores real[], max_parents integer, top_k_children integer) IS 'internal: parent-child for hits with their documents, not part of the API';

-- FUNCTION: _parents_document(uuid, uuid[], bigint[])
CREATE FUNCTION hrag._parents_document(doc uuid, node_ids uuid[], ords bigint[]) RETURNS TABLE(document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
    LANGUAGE plpgsql STABLE ROWS 30
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT n.document_id, h.ord, up.id, up.seq, up.subtree_end
      FROM unnest(node_ids, ords) AS h(id, ord)
      JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = h.id
      JOIN hrag.nodes p ON p.document_id = coalesce(doc, n.document_id) AND p.id = n.parent_id
      JOIN hrag.nodes up ON up.document_id = coalesce(doc, n.document_id)
                        AND up.id = CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END;
END
$$;

-- COMMENT: FUNCTION _parents_document(doc uuid, node_ids uuid[], ords bigint[])
COMMENT ON FUNCTION hrag._parents_document(doc uuid, node_ids uuid[], ords bigint[]) IS 'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the parent each hit expands to, not part of the API';

-- FUNCTION: _parents_each(uuid[], uuid[])
CREATE FUNCTION hrag._parents_each(node_ids uuid[], document_ids uuid[]) RETURNS TABLE(document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
    LANGUAGE plpgsql STABLE ROWS 30
    AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
    doc_ords bigint[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN h.doc END
                      FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.ord ORDER BY h.ord) INTO doc_ids, doc_ords
          FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._parents_document(this_doc, doc_ids, doc_ords);
    END LOOP;
END
$$;

-- COMMENT: FUNCTION _parents_each(node_ids uuid[], document_ids uuid[])
COMMENT ON FUNCTION hrag._parents_each(node_ids uuid[], document_ids uuid[]) IS 'internal: hrag._parents_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';

-- FUNCTION: _repair_document(uuid)
CREATE FUNCTION hrag._repair_document(doc uuid) RETURNS TABLE(wrong_child_count bigint, broken_ordering bigint, wrong_depth bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    n_counts  bigint;
    n_depth   bigint;
    n_order   bigint;
    ids       uuid[];
    new_seqs  integer[];
    new_ends  integer[];
    new_depths integer[];
BEGIN
    -- child_count, the hit-ratio denominator: what the rows say
    UPDATE hrag.nodes n
       SET child_count = c.actual
      FROM (SELECT p.id, count(k.id) AS actual
              FROM hrag.nodes p
              LEFT JOIN hrag.nodes k ON k.document_id = doc AND k.parent_id = p.id
             WHERE p.document_id = doc
             GROUP BY p.id) AS c
     WHERE n.document_id = doc AND n.id = c.id AND n.child_count <> c.actual;
    GET DIAGNOSTICS n_counts = ROW_COUNT;

    -- The tree walked in sibling order (position, then id for ties), numbered
    -- in pre-order; subtree_end from the count of descendants, depth from the
    -- count of ancestors.
    WITH RECURSIVE walk AS (
        SELECT n.id, ARRAY[n.id] AS ancestors,
               ARRAY[lpad(n.position::text, 10, '0') || n.id::text] AS sort_path
          FROM hrag.nodes n
         WHERE n.document_id = doc AND n.parent_id IS NULL
        UNION ALL
        SELECT c.id, w.ancestors || c.id, w.sort_path || (lpad(c.position::text, 10, '0') || c.id::text)
          FROM walk w
          JOIN hrag.nodes c ON c.document_id = doc AND c.parent_id = w.id
    ),
    numbered AS (
        SELECT w.*, (row_number() OVER (ORDER BY w.sort_path) - 1)::int AS new_seq FROM walk w
    ),
    renumbered AS (
        SELECT x.id, x.new_seq, cardinality(x.ancestors) - 1 AS new_depth,
               x.new_seq + (SELECT count(*) FROM numbered y WHERE x.id = ANY (y.ancestors) AND y.id <> x.id)::int
                   AS new_end
          FROM numbered x
    )
    SELECT array_agg(r.id), array_agg(r.new_seq), array_agg(r.new_end), array_agg(r.new_depth)
      INTO ids, new_seqs, new_ends, new_depths
      FROM renumbered r;

    -- Depths first, in one statement: the parent FK (NO ACTION) is checked
    -- when it ends, and later updates re-check the FK of the rows they touch.
    UPDATE hrag.nodes n
       SET depth = r.new_depth
      FROM unnest(ids, new_depths) AS r(id, new_depth)
     WHERE n.document_id = doc AND n.id = r.id AND n.depth <> r.new_depth;
    GET DIAGNOSTICS n_depth = ROW_COUNT;

    SELECT count(*) INTO n_order
      FROM hrag.nodes n
      JOIN unnest(ids, new_seqs, new_ends) AS r(id, new_seq, new_end) ON r.id = n.id
     WHERE n.document_id = doc AND (n.seq <> r.new_seq OR n.subtree_end <> r.new_end);
    IF n_order > 0 THEN
        -- Two steps so the (document_id, seq) unique constraint holds throughout.
        UPDATE hrag.nodes n
           SET seq = n.seq + 1000000000, subtree_end = n.seq + 1000000000
         WHERE n.document_id = doc AND n.id = ANY (ids);
        UPDATE hrag.nodes n
           SET seq = r.new_seq, subtree_end = r.new_end
          FROM unnest(ids, new_seqs, new_ends) AS r(id, new_seq, new_end)
         WHERE n.document_id = doc AND n.id = r.id;
    END IF;

    RETURN QUERY SELECT n_counts, least(n_order, 1), n_depth;
END
$$;

-- COMMENT: FUNCTION _repair_document(doc uuid)
COMMENT ON FUNCTION hrag._repair_document(doc uuid) IS 'internal: recompute one document''s child counts, pre-order ranges and depths (every statement on its shard), not part of the API';

-- FUNCTION: _retrieve_hits(uuid[], uuid[], real[], integer)
CREATE FUNCTION hrag._retrieve_hits(node_ids uuid[], document_ids uuid[], scores real[], max_tokens integer) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    sharpness     double precision := hrag._setting('hrag.auto_sharpness', 0.1);
    size_exponent double precision := hrag._setting('hrag.auto_size_exponent', 0.5);
    min_lift      double precision := hrag._setting('hrag.auto_min_lift', 2.0);
    -- a node holding two or more hits that cover at least this share of its
    -- tokens keeps its whole value when it replaces taken nodes (a merge);
    -- otherwise it is worth what it adds
    merge_share   double precision := hrag._setting('hrag.auto_merge_share', 0.25);
    -- the best this many hits keep room in the budget (the reserved hits)
    reserved      integer := least(greatest(hrag._setting('hrag.auto_reserved_hits', 2), 0), 1000)::integer;
    -- what a passage must be worth to be taken, in the evidence of the best
    -- hit (weight 1): this much per token it adds, plus this much for a new
    -- passage; the budget is a ceiling, not a target
    token_cost    double precision := hrag._setting('hrag.auto_token_cost', 0.002);
    passage_cost  double precision := hrag._setting('hrag.auto_passage_cost', 0.05);
    -- no passage this small but the best hit: a word or a label says nothing
    min_tokens    double precision := hrag._setting('hrag.auto_min_tokens', 6);
    best_score    real;
    node_value    double precision;
    r_doc         uuid[] := '{}';
    r_seq         integer[] := '{}';
    r_tok         integer[] := '{}';
    r_done        boolean[] := '{}';
    r_sum         integer := 0;
    reserve_tokens integer;
    r_at          integer;
    scope_tokens  double precision;
    sel_ids       uuid[] := '{}';
    sel_doc       uuid[] := '{}';
    sel_seq       integer[] := '{}';
    sel_end       integer[] := '{}';
    sel_tok       integer[] := '{}';
    sel_why       text[] := '{}';
    sel_children  integer[] := '{}';
    alive         boolean[] := '{}';
    inside        boolean;
    below_tokens  integer;
    below_any     boolean;
    used          integer := 0;
    first_priority double precision;
    over_budget   boolean := false;
    hit_ids       uuid[];
    hit_docs      uuid[];
    hit_scores    real[];
    hit_weights   double precision[];
    total_weight  double precision;
    sel_docs      uuid[];
    -- the candidates, best priority first (c_*), and those set aside (aside_*)
    c_node        uuid[];
    c_doc         uuid[];
    c_evidence    double precision[];
    c_seq         integer[];
    c_end         integer[];
    c_tokens      integer[];
    c_priority    double precision[];
    c_single_hit  boolean[];
    c_children    integer[];
    c_hit_share   double precision[];
    aside_at      integer[] := '{}';
    aside_priority double precision[] := '{}';
    sel_evidence  double precision[] := '{}';
    next_at       integer := 1;
    j             integer;
    best_aside    integer;
    priority      double precision;
    cur_doc       uuid;
    cur_seq       integer;
    cur_end       integer;
    cur_tokens    integer;
    added         double precision;
    below_evidence double precision;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    IF max_tokens IS NULL OR max_tokens < 1 OR max_tokens > 100000 THEN
        RAISE EXCEPTION 'hrag: argument "max_tokens" must be between 1 and 100000, got %',
            coalesce(max_tokens::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The size of what was searched: the stored tokens of the hits' collections.
    SELECT greatest(s.total_tokens, 1) INTO scope_tokens
      FROM hrag._collection_size(ARRAY(SELECT DISTINCT h.collection FROM hrag.documents h
                                        WHERE h.id = ANY (document_ids))) AS s;

    -- The hits (a duplicate id keeps its best score) and their weights; the
    -- ancestor climb runs per document (hrag._budget_candidates_document).
    WITH hit AS (
        SELECT h.id, max(h.score) AS score FROM unnest(node_ids, scores) AS h(id, score) GROUP BY h.id
    ),
    weighted AS (
        SELECT hit.id, hit.score,
               exp(greatest((hit.score - max(hit.score) OVER ())::double precision / sharpness, -50)) AS weight
          FROM hit
    )
    SELECT array_agg(w.id), array_agg(w.score), array_agg(w.weight), (SELECT sum(w.weight) FROM weighted w),
           max(w.score)
      INTO hit_ids, hit_scores, hit_weights, total_weight, best_score
      FROM weighted w;
    hit_docs := ARRAY(SELECT (SELECT d.doc FROM unnest(node_ids, document_ids) AS d(id, doc)
                               WHERE d.id = h.id AND d.doc IS NOT NULL LIMIT 1)
                        FROM unnest(hit_ids) WITH ORDINALITY AS h(id, ord)
                       ORDER BY h.ord);

    -- The candidates worth taking at all, best priority first.
    WITH cands AS MATERIALIZED (
        SELECT * FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores, hit_weights)
    )
    SELECT coalesce(array_agg(x.node_id ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id), '{}'),
           array_agg(x.document_id ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.evidence ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.seq ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.subtree_end ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.subtree_tokens ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.priority ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.hits = 1 AND x.child_count = 0 ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.children_hit::integer ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           -- the share of the node's tokens its hits cover (0 for one hit: a
           -- node around a single hit adds no evidence, only tokens)
           array_agg(CASE WHEN x.hits >= 2 THEN least(x.hit_tokens / greatest(x.subtree_tokens, 1), 1) ELSE 0 END
                     ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id)
      INTO c_node, c_doc, c_evidence, c_seq, c_end, c_tokens, c_priority, c_single_hit, c_children, c_hit_share
      FROM (SELECT cand.*,
                   -- the tokens of the hits inside (each hit is a candidate of its own)
                   (SELECT sum(h.subtree_tokens)::double precision
                      FROM cands h
                     WHERE h.node_id = ANY (hit_ids) AND h.document_id = cand.document_id
                       AND h.seq BETWEEN cand.seq AND cand.subtree_end) AS hit_tokens,
                   cand.evidence / power(greatest(cand.subtree_tokens, 1), size_exponent) AS priority,
                   -- share of the evidence over share of the searched text: 1 = no better than chance
                   (cand.evidence / total_weight) / (greatest(cand.subtree_tokens, 1) / scope_tokens) AS lift
              FROM cands AS cand) AS x
     WHERE x.lift >= min_lift
       AND x.subtree_tokens <= max_tokens
       AND (x.subtree_tokens >= min_tokens OR x.best >= best_score);

    -- The reserved hits: the best `reserved` hits among the candidates, in
    -- score order, as many as fit the budget together.
    FOR r_at IN SELECT array_position(c_node, h.id)
                  FROM unnest(hit_ids, hit_scores) AS h(id, score)
                 ORDER BY h.score DESC, h.id
                 LIMIT reserved LOOP
        CONTINUE WHEN r_at IS NULL OR r_sum + c_tokens[r_at] > max_tokens
                   OR c_evidence[r_at] < token_cost * c_tokens[r_at] + passage_cost;
        r_doc := r_doc || c_doc[r_at];
        r_seq := r_seq || c_seq[r_at];
        r_tok := r_tok || c_tokens[r_at];
        r_done := r_done || false;
        r_sum := r_sum + c_tokens[r_at];
    END LOOP;

    -- Greedy by priority: take each candidate that fits, a node replacing the
    -- taken nodes inside it.  Such a node is worth what it adds (the evidence
    -- not yet taken per power of the tokens it adds) unless its hits cover a
    -- merge_share of its tokens; worth less than its place in the order, it is set
    -- aside and comes back when the order reaches its new priority.  No node is
    -- taken that would leave too little room for the reserved hits it does not
    -- hold, so a large section with many weak hits cannot crowd out the best
    -- passage elsewhere.  After the first, a node is taken only if what it
    -- adds is worth its tokens (token_cost, passage_cost): a narrow question
    -- stops after a few passages, a broad one goes on while its evidence lasts.
    LOOP
        best_aside := 0;
        FOR i IN 1 .. cardinality(aside_at) LOOP
            IF best_aside = 0 OR aside_priority[i] > aside_priority[best_aside] THEN
                best_aside := i;
            END IF;
        END LOOP;
        IF best_aside > 0 AND (next_at > cardinality(c_node) OR aside_priority[best_aside] >= c_priority[next_at]) THEN
            j := aside_at[best_aside];
            priority := aside_priority[best_aside];
            aside_at := aside_at[:best_aside - 1] || aside_at[best_aside + 1:];
            aside_priority := aside_priority[:best_aside - 1] || aside_priority[best_aside + 1:];
        ELSIF next_at <= cardinality(c_node) THEN
            j := next_at;
            priority := c_priority[j];
            next_at := next_at + 1;
        ELSE
            EXIT;
        END IF;
        cur_doc := c_doc[j];
        cur_seq := c_seq[j];
        cur_end := c_end[j];
        cur_tokens := c_tokens[j];

        inside := false;
        below_tokens := 0;
        below_evidence := 0;
        below_any := false;
        FOR i IN 1 .. cardinality(sel_ids) LOOP
            CONTINUE WHEN NOT alive[i] OR sel_doc[i] <> cur_doc;
            IF cur_seq BETWEEN sel_seq[i] AND sel_end[i] THEN
                inside := true;
                EXIT;
            END IF;
            IF sel_seq[i] BETWEEN cur_seq AND cur_end THEN
                below_tokens := below_tokens + sel_tok[i];
                below_evidence := below_evidence + sel_evidence[i];
                below_any := true;
            END IF;
        END LOOP;
        CONTINUE WHEN inside;
        IF below_any AND c_hit_share[j] < merge_share THEN
            added := (c_evidence[j] - below_evidence) / power(greatest(cur_tokens - below_tokens, 1), size_exponent);
            IF added < priority THEN
                aside_at := aside_at || j;
                aside_priority := aside_priority || added;
                CONTINUE;
            END IF;
        END IF;
        IF first_priority IS NOT NULL THEN
            -- a merge brings its whole evidence; any other node what it adds
            node_value := CASE WHEN below_any AND c_hit_share[j] >= merge_share THEN c_evidence[j]
                               ELSE c_evidence[j] - below_evidence END;
            CONTINUE WHEN node_value < token_cost * (cur_tokens - below_tokens)
                                       + CASE WHEN below_any THEN 0 ELSE passage_cost END;
        END IF;
        reserve_tokens := 0;
        FOR i IN 1 .. cardinality(r_doc) LOOP
            CONTINUE WHEN r_done[i] OR (r_doc[i] = cur_doc AND r_seq[i] BETWEEN cur_seq AND cur_end);
            reserve_tokens := reserve_tokens + r_tok[i];
        END LOOP;
        CONTINUE WHEN used - below_tokens + cur_tokens + reserve_tokens > max_tokens;
        FOR i IN 1 .. cardinality(r_doc) LOOP
            IF r_doc[i] = cur_doc AND r_seq[i] BETWEEN cur_seq AND cur_end THEN
                r_done[i] := true;
            END IF;
        END LOOP;
        IF below_any THEN
            -- the node replaces the taken nodes inside it
            FOR i IN 1 .. cardinality(sel_ids) LOOP
                IF alive[i] AND sel_doc[i] = cur_doc AND sel_seq[i] BETWEEN cur_seq AND cur_end THEN
                    alive[i] := false;
                END IF;
            END LOOP;
        END IF;
        used := used - below_tokens + cur_tokens;
        first_priority := coalesce(first_priority, priority);
        sel_ids := sel_ids || c_node[j];
        sel_doc := sel_doc || cur_doc;
        sel_seq := sel_seq || cur_seq;
        sel_end := sel_end || cur_end;
        sel_tok := sel_tok || cur_tokens;
        sel_evidence := sel_evidence || c_evidence[j];
        alive := alive || true;
        sel_why := sel_why || CASE WHEN c_single_hit[j] THEN 'hit' ELSE 'merged' END;
        sel_children := sel_children || c_children[j];
    END LOOP;

    sel_why := ARRAY(SELECT w FROM unnest(sel_why, alive) WITH ORDINALITY AS x(w, a, i) WHERE a ORDER BY i);
    sel_ids := ARRAY(SELECT v FROM unnest(sel_ids, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_docs := ARRAY(SELECT v FROM unnest(sel_doc, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_children := ARRAY(SELECT v FROM unnest(sel_children, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);

    IF cardinality(sel_ids) = 0 THEN
        -- No candidate was worth taking (or fitted): the best hit that fits (and
        -- is not a scrap), so a hit never yields nothing; if none fits, the
        -- best hit alone, flagged.
        SELECT ARRAY[n.id], ARRAY[n.document_id],
               ARRAY[CASE WHEN n.subtree_tokens <= max_tokens THEN 'hit'
                          ELSE 'over budget: the best hit alone is larger than max_tokens' END],
               n.subtree_tokens > max_tokens
          INTO sel_ids, sel_docs, sel_why, over_budget
          FROM unnest(node_ids, document_ids, scores) AS h(id, doc, score)
          JOIN hrag.nodes n ON n.document_id = h.doc AND n.id = h.id
         WHERE n.subtree_tokens >= min_tokens OR h.score >= best_score
         ORDER BY n.subtree_tokens > max_tokens, h.score DESC, n.id
         LIMIT 1;
        -- (the rare path: the climb again, for that node's count of hit children)
        sel_children := ARRAY[coalesce((SELECT cand.children_hit::integer
                                          FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores,
                                                                            hit_weights) AS cand
                                         WHERE cand.node_id = sel_ids[1]), 0)];
    END IF;

    RETURN QUERY
    SELECT r.node_id, r.document_id, r.depth, r.title, r.heading_path, r.content, r.score, r.merged_from,
           r.hit_ratio, (row_number() OVER (ORDER BY r.score DESC, r.depth, r.node_id))::integer,
           r.token_count, r.reason
      FROM hrag._budget_rows_each(sel_ids, sel_docs, sel_why, sel_children, node_ids, document_ids, scores,
                                  over_budget) AS r
     ORDER BY r.score DESC, r.depth, r.node_id;
END
$$;

-- COMMENT: FUNCTION _retrieve_hits(node_ids uuid[], document_ids uuid[], scores real[], max_tokens integer)
COMMENT ON FUNCTION hrag._retrieve_hits(node_ids uuid[], document_ids uuid[], scores real[], max_tokens integer) IS 'internal: the budget mode for hits with their documents, not part of the API';

-- FUNCTION: _setting(text, double precision)
CREATE FUNCTION hrag._setting(name text, default_value double precision) RETURNS double precision
    LANGUAGE plpgsql STABLE
    AS $_$
DECLARE
    raw text := nullif(btrim(current_setting(name, true)), '');
BEGIN
    IF raw IS NULL THEN
        RETURN default_value;
    END IF;
    -- (a pattern, not an EXCEPTION block: that would open a subtransaction on every call)
    IF raw !~ '^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$' THEN
        RAISE EXCEPTION 'hrag: setting % must be a number, got %', name, quote_literal(raw)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN raw::double precision;
END
$_$;

-- COMMENT: FUNCTION _setting(name text, default_value double precision)
COMMENT ON FUNCTION hrag._setting(name text, default_value double precision) IS 'internal: a numeric hrag.* setting or its default, not part of the API';

-- FUNCTION: _statistics_per_document()
CREATE FUNCTION hrag._statistics_per_document() RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid = 'hrag.document_terms'::regclass);
END
$$;

-- COMMENT: FUNCTION _statistics_per_document()
COMMENT ON FUNCTION hrag._statistics_per_document() IS 'internal: are the lexical statistics the per-document rows (hrag.document_terms distributed by Citus), not part of the API';

-- FUNCTION: _subtree_text(uuid, integer, integer)
CREATE FUNCTION hrag._subtree_text(document_id uuid, first_seq integer, last_seq integer) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
    SELECT coalesce(string_agg(CASE WHEN t.is_first THEN t.content ELSE t.separator || t.content END,
                               '' ORDER BY t.seq), '')
      FROM (SELECT d.seq, d.content, d.separator, d.seq = min(d.seq) OVER () AS is_first
              FROM hrag.nodes d
             WHERE d.document_id = _subtree_text.document_id
               AND d.seq BETWEEN _subtree_text.first_seq AND _subtree_text.last_seq
               AND d.content <> '') AS t
$$;

-- COMMENT: FUNCTION _subtree_text(document_id uuid, first_seq integer, last_seq integer)
COMMENT ON FUNCTION hrag._subtree_text(document_id uuid, first_seq integer, last_seq integer) IS 'internal: full text of a seq range, not part of the API';

-- FUNCTION: _term_weights(text[], text)
CREATE FUNCTION hrag._term_weights(terms text[], collection text) RETURNS TABLE(term text, df bigint, idf real)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    leaves      bigint;
    found_terms text[];
    found_df    bigint[];
BEGIN
    SELECT greatest(s.search_targets, 1) INTO leaves
      FROM hrag._collection_size(CASE WHEN collection IS NULL THEN NULL ELSE ARRAY[collection] END) AS s;
    IF hrag._statistics_per_document() THEN
        -- Citus: the per-document rows, summed on the shards
        SELECT array_agg(p.term), array_agg(p.df) INTO found_terms, found_df
          FROM (SELECT t.term, sum(t.leaves)::bigint AS df
                  FROM hrag.document_terms t
                 WHERE t.term = ANY (terms)
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)
                 GROUP BY t.term) AS p;
    ELSE
        -- the per-collection rows: a few per term, whatever the number of documents
        SELECT array_agg(p.term), array_agg(p.df) INTO found_terms, found_df
          FROM (SELECT t.term, sum(t.leaves)::bigint AS df
                  FROM hrag.collection_terms t
                 WHERE t.term = ANY (terms)
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)
                 GROUP BY t.term) AS p;
    END IF;
    RETURN QUERY
    SELECT q.term, f.df, ln(1.0 + (leaves - f.df + 0.5) / (f.df + 0.5))::real
      FROM unnest(terms) AS q(term)
      JOIN unnest(found_terms, found_df) AS f(term, df) ON f.term = q.term
     WHERE f.df > 0
     ORDER BY f.df, q.term;
END
$$;

-- COMMENT: FUNCTION _term_weights(terms text[], collection text)
COMMENT ON FUNCTION hrag._term_weights(terms text[], collection text) IS 'internal: BM25 IDF of query terms in a collection, not part of the API';

-- FUNCTION: _vector_index_state()
CREATE FUNCTION hrag._vector_index_state() RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN bool_or(i.indisvalid AND i.indisready) THEN 'valid'
                WHEN count(*) > 0 THEN 'invalid'
                ELSE 'missing' END
      FROM pg_catalog.pg_index i
      JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_catalog.pg_am am ON am.oid = ic.relam
     WHERE i.indrelid = 'hrag.nodes'::regclass
       AND am.amname = 'hnsw'
$$;

-- COMMENT: FUNCTION _vector_index_state()
COMMENT ON FUNCTION hrag._vector_index_state() IS 'internal: valid, invalid or missing, not part of the API';

-- FUNCTION: auto_merge(public.vector, integer, real, text, jsonb)
CREATE FUNCTION hrag.auto_merge(query public.vector, top_k integer DEFAULT 12, merge_threshold real DEFAULT 0.5, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer)
    LANGUAGE sql STABLE ROWS 10
    AS $$
    WITH hits AS (
        SELECT s.node_id, s.document_id, s.score
          FROM hrag.search_leaves(query, top_k, collection, filter) AS s
    )
    SELECT m.*
      FROM hrag._auto_merge_ranked(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                   ARRAY(SELECT h.document_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                   ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                                   merge_threshold) AS m
     ORDER BY m.rank
$$;

-- COMMENT: FUNCTION auto_merge(query public.vector, top_k integer, merge_threshold real, collection text, filter jsonb)
COMMENT ON FUNCTION hrag.auto_merge(query public.vector, top_k integer, merge_threshold real, collection text, filter jsonb) IS 'Auto-merging: hit leaves, replace them by their parent where hit children / children >= merge_threshold, upward';

-- FUNCTION: auto_merge_hits(uuid[], real[], real)
CREATE FUNCTION hrag.auto_merge_hits(node_ids uuid[], scores real[], merge_threshold real DEFAULT 0.5) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY
    SELECT * FROM hrag._auto_merge_ranked(node_ids, hrag._document_ids(node_ids), scores, merge_threshold);
END
$$;

-- COMMENT: FUNCTION auto_merge_hits(node_ids uuid[], scores real[], merge_threshold real)
COMMENT ON FUNCTION hrag.auto_merge_hits(node_ids uuid[], scores real[], merge_threshold real) IS 'The auto-merge for hits from elsewhere (a reranker, a keyword search), with why each node was returned';

-- FUNCTION: check_integrity()
CREATE FUNCTION hrag.check_integrity() RETURNS TABLE(problem text, document_id uuid, node_id uuid, detail text)
    LANGUAGE plpgsql STABLE
    AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    -- the ANN index (a crashed bulk load can leave none)
    SELECT 'vector_index_' || s.state, NULL::uuid, NULL::uuid,
           CASE s.state
               WHEN 'missing' THEN 'hrag.nodes has no HNSW index on embedding (a bulk load stopped before '
                                   'rebuilding it?): searches scan every row; run hrag check --repair'
               ELSE 'the HNSW index on hrag.nodes.embedding is invalid (an interrupted build): '
                    'run hrag check --repair' END
      FROM (SELECT hrag._vector_index_state() AS state) AS s
     WHERE s.state <> 'valid'
    UNION ALL
    -- documents without exactly one root
    SELECT 'document_without_root', d.id, NULL::uuid,
           format('document %s (%s) has no root node', d.source, d.collection)
      FROM hrag.documents d
     WHERE NOT EXISTS (SELECT 1 FROM hrag.nodes n WHERE n.document_id = d.id AND n.parent_id IS NULL)
    UNION ALL
    SELECT 'document_with_several_roots', n.document_id, NULL::uuid,
           format('%s root nodes', count(*))
      FROM hrag.nodes n
     WHERE n.parent_id IS NULL
     GROUP BY n.document_id
    HAVING count(*) > 1
    UNION ALL
    -- child_count, the hit-ratio denominator
    SELECT 'wrong_child_count', n.document_id, n.id,
           format('child_count is %s, the node has %s children', n.child_count, coalesce(c.actual, 0))
      FROM hrag.nodes n
      LEFT JOIN (SELECT k.document_id, k.parent_id, count(*) AS actual FROM hrag.nodes k
                  GROUP BY k.document_id, k.parent_id) c
             ON c.document_id = n.document_id AND c.parent_id = n.id
     WHERE n.child_count <> coalesce(c.actual, 0)
    UNION ALL
    -- depth (normally guaranteed by the parent FK)
    SELECT 'wrong_depth', n.document_id, n.id,
           format('depth is %s, its parent''s is %s', n.depth, p.depth)
      FROM hrag.nodes n
      JOIN hrag.nodes p ON p.document_id = n.document_id AND p.id = n.parent_id
     WHERE n.depth <> p.depth + 1
    UNION ALL
    -- pre-order ranges: a root starts at 0; a first child right after its
    -- parent; a later child right after its previous sibling's subtree; a
    -- subtree ends where its last child's does (or at itself for a leaf)
    SELECT 'broken_ordering', n.document_id, n.id,
           format('seq %s / subtree_end %s, expected %s / %s', n.seq, n.subtree_end,
                  expected.seq, expected.subtree_end)
      FROM hrag.nodes n
      LEFT JOIN hrag.nodes p ON p.document_id = n.document_id AND p.id = n.parent_id
      LEFT JOIN (SELECT s.document_id, s.parent_id, s.position, max(s.subtree_end) AS subtree_end
                   FROM hrag.nodes s GROUP BY s.document_id, s.parent_id, s.position) AS previous
             ON previous.document_id = n.document_id AND previous.parent_id = n.parent_id
            AND previous.position = n.position - 1
      LEFT JOIN (SELECT c.document_id, c.parent_id, max(c.subtree_end) AS subtree_end
                   FROM hrag.nodes c GROUP BY c.document_id, c.parent_id) AS last_child
             ON last_child.document_id = n.document_id AND last_child.parent_id = n.id
      CROSS JOIN LATERAL (
          SELECT CASE
                     WHEN n.parent_id IS NULL THEN 0
                     WHEN n.position = 0 THEN p.seq + 1
                     ELSE previous.subtree_end + 1
                 END AS seq,
                 coalesce(last_child.subtree_end, n.seq) AS subtree_end
      ) AS expected
     WHERE n.seq IS DISTINCT FROM expected.seq OR n.subtree_end IS DISTINCT FROM expected.subtree_end
    UNION ALL
    -- every leaf below the root is a search target, but markup (text no
    -- reader sees, such as a link's target, revision 0022)
    SELECT 'leaf_without_embedding', n.document_id, n.id,
           format('%s leaf at depth %s has no embedding: re-ingest its document with --force', n.kind, n.depth)
      FROM hrag.nodes n
     WHERE n.embedding IS NULL
       AND n.depth > 0
       AND n.kind <> 'markup'
       AND NOT EXISTS (SELECT 1 FROM hrag.nodes c WHERE c.document_id = n.document_id AND c.parent_id = n.id);

    IF hrag._statistics_per_document() THEN
        RETURN;  -- Citus: the per-document rows are the statistics
    END IF;
    RETURN QUERY
    -- the per-collection lexical statistics against the documents' rows, one
    -- row per collection that is off (with its first wrong term)
    WITH counted AS (
        SELECT t.collection, t.term, sum(t.leaves)::bigint AS leaves
          FROM hrag.collection_terms t GROUP BY t.collection, t.term
    ),
    actual AS (
        SELECT t.collection, t.term, sum(t.leaves)::bigint AS leaves
          FROM hrag.document_terms t GROUP BY t.collection, t.term
    ),
    wrong AS (
        SELECT coalesce(c.collection, a.collection) AS collection, coalesce(c.term, a.term) AS term,
               coalesce(c.leaves, 0) AS counted, coalesce(a.leaves, 0) AS actual
          FROM counted c
          FULL JOIN actual a ON a.collection = c.collection AND a.term = c.term
         WHERE coalesce(c.leaves, 0) <> coalesce(a.leaves, 0)
    )
    SELECT 'wrong_term_statistics', NULL::uuid, NULL::uuid,
           format('collection %s: hrag.collection_terms counts %s of its terms wrong (first: %s in %s leaves, '
                  'its documents say %s): run hrag check --repair',
                  w.collection, count(*), min(w.term),
                  (array_agg(w.counted ORDER BY w.term))[1], (array_agg(w.actual ORDER BY w.term))[1])
      FROM wrong w
     GROUP BY w.collection
    UNION ALL
    SELECT 'wrong_collection_size', NULL::uuid, NULL::uuid,
           format('collection %s: hrag.collection_sizes counts %s search targets and %s tokens, '
                  'its documents %s and %s: run hrag check --repair',
                  coalesce(c.collection, a.collection), coalesce(c.targets, 0), coalesce(c.tokens, 0),
                  coalesce(a.targets, 0), coalesce(a.tokens, 0))
      FROM (SELECT s.collection, sum(s.search_targets)::bigint AS targets, sum(s.total_tokens)::bigint AS tokens
              FROM hrag.collection_sizes s GROUP BY s.collection) AS c
      FULL JOIN (SELECT d.collection, sum(d.search_targets)::bigint AS targets,
                        sum(d.total_tokens)::bigint AS tokens
                   FROM hrag.documents d GROUP BY d.collection) AS a ON a.collection = c.collection
     WHERE coalesce(c.targets, 0) <> coalesce(a.targets, 0) OR coalesce(c.tokens, 0) <> coalesce(a.tokens, 0);
END
$$;

-- COMMENT: FUNCTION check_integrity()
COMMENT ON FUNCTION hrag.check_integrity() IS 'One row per problem: vector index, roots, child counts, pre-order ranges, depths, leaves without embedding (markup leaves excepted), term statistics';

-- FUNCTION: create_tenant_role(name, text[], boolean)
CREATE FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean DEFAULT false) RETURNS void
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

-- COMMENT: FUNCTION create_tenant_role(role_name name, collections text[], can_write boolean)
COMMENT ON FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean) IS 'Create or update a role that sees only the given collections (row-level security); can_write lets it ingest';

-- FUNCTION: distribute(integer)
CREATE FUNCTION hrag.distribute(shard_count integer DEFAULT NULL::integer) RETURNS TABLE(table_name text, distribution text, action text)
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

-- COMMENT: FUNCTION distribute(shard_count integer)
COMMENT ON FUNCTION hrag.distribute(shard_count integer) IS 'Distribute hrag over a Citus cluster: documents by id, nodes by document_id (colocated), small tables as reference tables; idempotent';

-- FUNCTION: finish_reembed(text)
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

-- COMMENT: FUNCTION finish_reembed(collection text)
COMMENT ON FUNCTION hrag.finish_reembed(collection text) IS 'Swap in the vectors an unfinished reembed prepared, for the whole collection in one transaction (hrag reembed calls it)';

-- FUNCTION: grant_reader(name)
CREATE FUNCTION hrag.grant_reader(role_name name) RETURNS void
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

-- COMMENT: FUNCTION grant_reader(role_name name)
COMMENT ON FUNCTION hrag.grant_reader(role_name name) IS 'Let a role retrieve (read tables, call functions) but not write';

-- FUNCTION: lexical_terms(text)
CREATE FUNCTION hrag.lexical_terms(input text) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    WITH word AS (
        SELECT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', coalesce(input, '')))) AS lexeme
    )
    SELECT coalesce(array_agg(DISTINCT term), '{}')
      FROM (
            -- English (and other space-separated) words, stemmed, no stop words
            SELECT w.lexeme AS term
              FROM word w
             WHERE w.lexeme !~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]'
            UNION ALL
            -- character bigrams of CJK runs (a lone character stands for itself)
            SELECT substr(run.text, i, 2)
              FROM regexp_matches(coalesce(input, ''),
                                  '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+',
                                  'g') AS m(parts),
                   LATERAL (SELECT m.parts[1] AS text) AS run,
                   generate_series(1, greatest(length(run.text) - 1, 1)) AS i
            UNION ALL
            -- identifiers joined by underscores, whole (the parser splits them
            -- into words): wait_for, shared_buffers, ERR_STREAM_PREMATURE_CLOSE;
            -- not one the parser kept inside a longer term (child_process.exec)
            SELECT ident.name
              FROM (SELECT DISTINCT lower(m.parts[1]) AS name
                      FROM regexp_matches(coalesce(input, ''), '([A-Za-z0-9]+(?:_+[A-Za-z0-9]+)+)', 'g')
                           AS m(parts)) AS ident
             WHERE NOT EXISTS (SELECT 1 FROM word w WHERE strpos(w.lexeme, ident.name) > 0)
           ) AS terms
     WHERE term <> ''
       AND term !~ '[\u3040-\u309f]'
$$;

-- COMMENT: FUNCTION lexical_terms(input text)
COMMENT ON FUNCTION hrag.lexical_terms(input text) IS 'The distinct search terms of a text: English stems without stop words, CJK character bigrams, identifiers joined by underscores';

-- FUNCTION: node_lexical_terms(text[], text, jsonb)
CREATE FUNCTION hrag.node_lexical_terms(heading_path text[], content text, metadata jsonb) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT hrag.lexical_terms(array_to_string(heading_path, ' ') || ' '
                              || coalesce(metadata->>'question', content))
$$;

-- COMMENT: FUNCTION node_lexical_terms(heading_path text[], content text, metadata jsonb)
COMMENT ON FUNCTION hrag.node_lexical_terms(heading_path text[], content text, metadata jsonb) IS 'The search terms stored for a node (heading path and text; the question of a QA node)';

-- FUNCTION: node_text(uuid)
CREATE FUNCTION hrag.node_text(node_id uuid) RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$
DECLARE
    doc       uuid;
    first_seq integer;
    last_seq  integer;
BEGIN
    SELECT n.document_id, n.seq, n.subtree_end INTO doc, first_seq, last_seq
      FROM hrag.nodes n
     WHERE n.id = node_text.node_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN hrag._subtree_text(doc, first_seq, last_seq);
END
$$;

-- COMMENT: FUNCTION node_text(node_id uuid)
COMMENT ON FUNCTION hrag.node_text(node_id uuid) IS 'Full text of any node: its own text and its descendants'', in document order (NULL for an unknown id)';

-- FUNCTION: node_text(uuid, uuid)
CREATE FUNCTION hrag.node_text(document_id uuid, node_id uuid) RETURNS text
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

-- COMMENT: FUNCTION node_text(document_id uuid, node_id uuid)
COMMENT ON FUNCTION hrag.node_text(document_id uuid, node_id uuid) IS 'Full text of a node looked up with its document id (one shard on Citus); NULL if the pair is unknown';

-- FUNCTION: parent_child(public.vector, integer, integer, text, jsonb, real)
CREATE FUNCTION hrag.parent_child(query public.vector, top_k_children integer DEFAULT 20, max_parents integer DEFAULT 4, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb, min_score real DEFAULT NULL::real) RETURNS TABLE(node_id uuid, document_id uuid, title text, heading_path text[], content text, score real, matched_children uuid[], rank integer, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
#variable_conflict use_column
DECLARE
    ids    uuid[];
    docs   uuid[];
    sims   real[];
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');
    -- search_leaves returns each leaf's parent_id: roots (no parent) drop out here
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.document_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO ids, docs, sims
      FROM hrag.search_leaves(query, least(greatest(top_k_children, 10 * max_parents), 1000), collection, filter) AS s
     WHERE s.parent_id IS NOT NULL
       AND (min_score IS NULL OR s.score >= min_score);
    RETURN QUERY SELECT * FROM hrag._parent_child_hits(ids, docs, sims, max_parents, top_k_children);
END
$$;

-- COMMENT: FUNCTION parent_child(query public.vector, top_k_children integer, max_parents integer, collection text, filter jsonb, min_score real)
COMMENT ON FUNCTION hrag.parent_child(query public.vector, top_k_children integer, max_parents integer, collection text, filter jsonb, min_score real) IS 'Small-to-big: match the top children, return their distinct, non-overlapping parents'' full text';

-- FUNCTION: parent_child_hits(uuid[], real[], integer, integer)
CREATE FUNCTION hrag.parent_child_hits(node_ids uuid[], scores real[], max_parents integer DEFAULT 4, top_k_children integer DEFAULT NULL::integer) RETURNS TABLE(node_id uuid, document_id uuid, title text, heading_path text[], content text, score real, matched_children uuid[], rank integer, token_count integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY
    SELECT * FROM hrag._parent_child_hits(node_ids, hrag._document_ids(node_ids), scores, max_parents,
                                          top_k_children);
END
$$;

-- COMMENT: FUNCTION parent_child_hits(node_ids uuid[], scores real[], max_parents integer, top_k_children integer)
COMMENT ON FUNCTION hrag.parent_child_hits(node_ids uuid[], scores real[], max_parents integer, top_k_children integer) IS 'Small-to-big for hits from elsewhere (array order is rank order); never two overlapping parents';

-- FUNCTION: refresh_document_terms(uuid)
CREATE FUNCTION hrag.refresh_document_terms(document_id uuid) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    doc_collection text;
    fresh_terms    text[];
    fresh_leaves   integer[];
BEGIN
    -- The document's counts as its rows say now.  Only what differs from the
    -- stored ones is written, so an edit of one paragraph writes a few rows and
    -- the statistics' triggers fold only their terms.
    SELECT coalesce(array_agg(f.term ORDER BY f.term), '{}'), coalesce(array_agg(f.leaves ORDER BY f.term), '{}')
      INTO fresh_terms, fresh_leaves
      FROM (SELECT term.value AS term, count(*)::integer AS leaves
              FROM hrag.nodes n
             CROSS JOIN LATERAL unnest(n.lexical_terms) AS term(value)
             WHERE n.document_id = refresh_document_terms.document_id
               AND n.lexical_terms IS NOT NULL
             GROUP BY term.value) AS f;
    SELECT d.collection INTO doc_collection FROM hrag.documents d WHERE d.id = refresh_document_terms.document_id;

    DELETE FROM hrag.document_terms t
     WHERE t.document_id = refresh_document_terms.document_id
       AND NOT EXISTS (SELECT 1 FROM unnest(fresh_terms) AS f(term) WHERE f.term = t.term);
    UPDATE hrag.document_terms t
       SET leaves = f.leaves
      FROM unnest(fresh_terms, fresh_leaves) AS f(term, leaves)
     WHERE t.document_id = refresh_document_terms.document_id
       AND t.term = f.term
       AND t.leaves <> f.leaves;
    INSERT INTO hrag.document_terms (document_id, collection, term, leaves)
    SELECT refresh_document_terms.document_id, doc_collection, f.term, f.leaves
      FROM unnest(fresh_terms, fresh_leaves) AS f(term, leaves)
     WHERE NOT EXISTS (SELECT 1 FROM hrag.document_terms t
                        WHERE t.document_id = refresh_document_terms.document_id AND t.term = f.term);

    UPDATE hrag.documents d
       SET search_targets = c.targets, total_tokens = c.tokens
      FROM (SELECT (SELECT count(*) FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id AND n.embedding IS NOT NULL)::integer
                       AS targets,
                   (SELECT coalesce(sum(n.subtree_tokens), 0) FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id AND n.parent_id IS NULL)::integer
                       AS tokens) AS c
     WHERE d.id = refresh_document_terms.document_id
       AND (d.search_targets, d.total_tokens) IS DISTINCT FROM (c.targets, c.tokens);
END
$$;

-- COMMENT: FUNCTION refresh_document_terms(document_id uuid)
COMMENT ON FUNCTION hrag.refresh_document_terms(document_id uuid) IS 'Rewrite one document''s lexical statistics from its rows (ingestion calls it in the document''s transaction)';

-- FUNCTION: repair_integrity()
CREATE FUNCTION hrag.repair_integrity() RETURNS TABLE(problem text, fixed bigint)
    LANGUAGE plpgsql
    AS $$
DECLARE
    n_counts bigint := 0;
    n_order  bigint := 0;
    n_depth  bigint := 0;
    n_index  bigint := 0;
    n_stats  bigint := 0;
    doc      uuid;
    fixed_in record;
BEGIN
    IF hrag._vector_index_state() <> 'valid' THEN
        DROP INDEX IF EXISTS hrag.nodes_embedding_hnsw_idx;
        -- an invalid index under another name: drop every non-valid HNSW index on nodes
        PERFORM hrag._drop_invalid_vector_indexes();
        PERFORM hrag._create_vector_index();
        n_index := 1;
    END IF;

    FOR doc IN SELECT DISTINCT c.document_id
                 FROM hrag.check_integrity() c
                WHERE c.problem IN ('wrong_child_count', 'broken_ordering', 'wrong_depth')
                  AND c.document_id IS NOT NULL
                ORDER BY c.document_id LOOP
        SELECT * INTO fixed_in FROM hrag._repair_document(doc);
        n_counts := n_counts + fixed_in.wrong_child_count;
        n_order := n_order + fixed_in.broken_ordering;
        n_depth := n_depth + fixed_in.wrong_depth;
    END LOOP;

    IF EXISTS (SELECT 1 FROM hrag.check_integrity() c
                WHERE c.problem IN ('wrong_term_statistics', 'wrong_collection_size')) THEN
        -- counted afresh with the writers held off, the triggers recreated
        PERFORM hrag._keep_collection_statistics();
        n_stats := 1;
    END IF;

    RETURN QUERY VALUES ('vector_index', n_index), ('wrong_child_count', n_counts),
                        ('broken_ordering', n_order), ('wrong_depth', n_depth), ('term_statistics', n_stats);
END
$$;

-- COMMENT: FUNCTION repair_integrity()
COMMENT ON FUNCTION hrag.repair_integrity() IS 'Recompute child counts, ranges and depths and rebuild a missing vector index; returns what was fixed';

-- FUNCTION: retrieve(public.vector, text, integer, text, jsonb, integer, real)
CREATE FUNCTION hrag.retrieve(query public.vector, query_text text DEFAULT NULL::text, max_tokens integer DEFAULT 2000, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb, top_k integer DEFAULT 30, lexical_weight real DEFAULT 0.3) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
DECLARE
    hit_ids    uuid[];
    hit_docs   uuid[];
    hit_scores real[];
BEGIN
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.document_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO hit_ids, hit_docs, hit_scores
      FROM hrag.search_hybrid(query, query_text, top_k, collection, filter, lexical_weight, top_k) AS s;
    RETURN QUERY SELECT * FROM hrag._retrieve_hits(hit_ids, hit_docs, hit_scores, max_tokens) AS r ORDER BY r.rank;
END
$$;

-- COMMENT: FUNCTION retrieve(query public.vector, query_text text, max_tokens integer, collection text, filter jsonb, top_k integer, lexical_weight real)
COMMENT ON FUNCTION hrag.retrieve(query public.vector, query_text text, max_tokens integer, collection text, filter jsonb, top_k integer, lexical_weight real) IS 'Budget-aware retrieval: candidates (vector + lexical) -> the best non-overlapping context within max_tokens';

-- FUNCTION: retrieve_hits(uuid[], real[], integer)
CREATE FUNCTION hrag.retrieve_hits(node_ids uuid[], scores real[], max_tokens integer DEFAULT 2000) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY SELECT * FROM hrag._retrieve_hits(node_ids, hrag._document_ids(node_ids), scores, max_tokens);
END
$$;

-- COMMENT: FUNCTION retrieve_hits(node_ids uuid[], scores real[], max_tokens integer)
COMMENT ON FUNCTION hrag.retrieve_hits(node_ids uuid[], scores real[], max_tokens integer) IS 'The best non-overlapping context within max_tokens for hits from anywhere, with why each node was chosen';

-- FUNCTION: sample_hits(integer, text, real)
CREATE FUNCTION hrag.sample_hits(k integer, collection text DEFAULT NULL::text, max_share real DEFAULT 0.1) RETURNS integer
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    targets bigint;
BEGIN
    IF max_share IS NULL THEN
        RETURN k;
    END IF;
    SELECT s.search_targets INTO targets
      FROM hrag._collection_size(CASE WHEN collection IS NULL THEN NULL ELSE ARRAY[collection] END) AS s;
    RETURN least(k, greatest(1, ceil(max_share * targets)))::integer;
END
$$;

-- COMMENT: FUNCTION sample_hits(k integer, collection text, max_share real)
COMMENT ON FUNCTION hrag.sample_hits(k integer, collection text, max_share real) IS 'How many hits a merge should take: k, but at most max_share of the collection''s search targets';

-- FUNCTION: search_hybrid(public.vector, text, integer, text, jsonb, real, integer, real)
CREATE FUNCTION hrag.search_hybrid(query public.vector, query_text text, k integer DEFAULT 20, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb, lexical_weight real DEFAULT 0.3, candidates integer DEFAULT NULL::integer, min_relative_score real DEFAULT NULL::real) RETURNS TABLE(node_id uuid, parent_id uuid, document_id uuid, score real, vector_score real, lexical_score real)
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
    IF query IS NOT NULL OR query_text IS NULL THEN
        PERFORM hrag._check_query(query, filter);
    ELSE
        -- A question without its vector (from psql, say): the lexical channel
        -- alone ranks the leaves by the question's terms.
        IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
            RAISE EXCEPTION 'hrag: argument "filter" must be a JSON object, got a JSON %', jsonb_typeof(filter)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE NOTICE 'hrag: no query vector: the leaves are ranked by the question''s terms alone (the lexical channel); pass the question''s embedding for semantic search';
    END IF;
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

    IF lexical_weight > 0 OR query IS NULL THEN
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
    IF query IS NULL AND cardinality(rare) = 0 AND cardinality(hashes) > 0 THEN
        rare := hashes[1:1];  -- only common terms: the rarest still finds leaves, rare_cap of them
    END IF;
    weight := CASE WHEN query IS NULL THEN 1 WHEN total > 0 THEN lexical_weight ELSE 0 END;
    -- Where similarity starts to mean something under the collection's
    -- model (hrag.collection_models.vector_baseline): E5-style models put
    -- unrelated texts near 0.8 (their baseline is 0.65), MiniLM near 0.1
    -- (its baseline is 0).  The fusion reads the similarity above it,
    -- rescaled to [0, 1], so one lexical weight and one budget-mode
    -- sharpness serve models whose cosines live on different scales.  Below
    -- the baseline it reads 0, so every score is in [0, 1].
    SELECT coalesce(max(m.vector_baseline), 0) INTO baseline
      FROM hrag.collection_models m
     WHERE search_hybrid.collection IS NULL OR m.collection = search_hybrid.collection;

    RETURN QUERY
    WITH vector_hit AS (
        SELECT s.node_id, s.parent_id, s.document_id, s.score AS vector_score
          FROM hrag.search_leaves(query, candidates, collection, filter) AS s
         WHERE query IS NOT NULL
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
        SELECT p.*, ((1 - weight) * coalesce(greatest(p.vector_score - baseline, 0) / (1 - baseline), 0)
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

-- COMMENT: FUNCTION search_hybrid(query public.vector, query_text text, k integer, collection text, filter jsonb, lexical_weight real, candidates integer, min_relative_score real)
COMMENT ON FUNCTION hrag.search_hybrid(query public.vector, query_text text, k integer, collection text, filter jsonb, lexical_weight real, candidates integer, min_relative_score real) IS 'The candidate stage: ANN candidates plus lexical candidates from the whole collection, fused (cosine and IDF-weighted term coverage)';

-- FUNCTION: search_leaves(public.vector, integer, text, jsonb)
CREATE FUNCTION hrag.search_leaves(query public.vector, k integer DEFAULT 20, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb) RETURNS TABLE(node_id uuid, parent_id uuid, document_id uuid, score real)
    LANGUAGE plpgsql STABLE ROWS 30
    SET "hnsw.iterative_scan" TO 'relaxed_order'
    AS $$
#variable_conflict use_column
DECLARE
    ids     uuid[];
    parents uuid[];
    docs    uuid[];
    sims    real[];
    depth   integer;
    caller  text;
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    depth := hrag._ef_search(k);
    caller := current_setting('hnsw.ef_search');
    IF caller::integer <> depth THEN
        PERFORM set_config('hnsw.ef_search', depth::text, true);
    END IF;

    SELECT array_agg(hit.id ORDER BY hit.distance, hit.id),
           array_agg(hit.parent_id ORDER BY hit.distance, hit.id),
           array_agg(hit.document_id ORDER BY hit.distance, hit.id),
           array_agg((1 - hit.distance)::real ORDER BY hit.distance, hit.id)
      INTO ids, parents, docs, sims
      FROM (SELECT n.id, n.parent_id, n.document_id, n.embedding <=> query AS distance
              FROM hrag.nodes n
             WHERE n.embedding IS NOT NULL
               AND (search_leaves.collection IS NULL OR n.collection = search_leaves.collection)
               AND (search_leaves.filter IS NULL
                    OR n.metadata @> search_leaves.filter
                    OR EXISTS (SELECT 1 FROM hrag.documents d
                                WHERE d.id = n.document_id
                                  AND (d.metadata || n.metadata) @> search_leaves.filter))
             ORDER BY n.embedding <=> query
             LIMIT k) AS hit;
    -- The caller's depth again: a SET LOCAL inside a function lasts to the
    -- end of the transaction (only the SET clause above is undone on return).
    IF caller::integer <> depth THEN
        PERFORM set_config('hnsw.ef_search', caller, true);
    END IF;

    IF coalesce(cardinality(ids), 0) >= k THEN
        RETURN QUERY SELECT * FROM unnest(ids, parents, docs, sims);
        RETURN;
    END IF;

    -- Fewer than k: either fewer than k nodes match (a small collection, a
    -- selective filter), or the HNSW graph is temporarily missing live rows —
    -- pgvector 0.8 loses reachability when a vector is deleted and inserted
    -- again many times before VACUUM (re-ingesting flip-flopping versions).
    -- An exact scan settles it (`+ 0` keeps it off the index); the
    -- collection index keeps it cheap for small collections.
    RETURN QUERY
    SELECT hit.id, hit.parent_id, hit.document_id, (1 - hit.distance)::real
      FROM (SELECT n.id, n.parent_id, n.document_id, (n.embedding <=> query) + 0 AS distance
              FROM hrag.nodes n
             WHERE n.embedding IS NOT NULL
               AND (search_leaves.collection IS NULL OR n.collection = search_leaves.collection)
               AND (search_leaves.filter IS NULL
                    OR n.metadata @> search_leaves.filter
                    OR EXISTS (SELECT 1 FROM hrag.documents d
                                WHERE d.id = n.document_id
                                  AND (d.metadata || n.metadata) @> search_leaves.filter))
             ORDER BY 4, 1
             LIMIT k) AS hit
     ORDER BY hit.distance, hit.id;
END
$$;

-- COMMENT: FUNCTION search_leaves(query public.vector, k integer, collection text, filter jsonb)
COMMENT ON FUNCTION hrag.search_leaves(query public.vector, k integer, collection text, filter jsonb) IS 'The ANN step: the k embedded nodes nearest the query (cosine), collection and metadata filters inside the HNSW scan';

-- FUNCTION: term_hash(text)
CREATE FUNCTION hrag.term_hash(term text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT hashtextextended(term, 0)
$$;

-- COMMENT: FUNCTION term_hash(term text)
COMMENT ON FUNCTION hrag.term_hash(term text) IS 'The 64-bit hash of a search term, as stored in nodes.lexical_hashes';

-- FUNCTION: term_hashes(text[])
CREATE FUNCTION hrag.term_hashes(terms text[]) RETURNS bigint[]
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT coalesce(array_agg(hrag.term_hash(t.term) ORDER BY t.ord), '{}')
      FROM unnest(terms) WITH ORDINALITY AS t(term, ord)
$$;

-- COMMENT: FUNCTION term_hashes(terms text[])
COMMENT ON FUNCTION hrag.term_hashes(terms text[]) IS 'The hashes of search terms, in their order (nodes.lexical_hashes of nodes.lexical_terms)';

-- FUNCTION: visible_collections()
CREATE FUNCTION hrag.visible_collections() RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    SELECT array_agg(t.collection) FROM hrag.tenant_collections t
$$;

-- COMMENT: FUNCTION visible_collections()
COMMENT ON FUNCTION hrag.visible_collections() IS 'The collections the current role is bound to, or NULL if it is not a tenant (sees everything)';

-- TABLE: alembic_version
CREATE TABLE hrag.alembic_version (
    version_num character varying(32) NOT NULL
);

-- TABLE: collection_models
CREATE TABLE hrag.collection_models (
    collection text NOT NULL,
    model text NOT NULL,
    dimension integer NOT NULL,
    fingerprint text DEFAULT ''::text NOT NULL,
    query_prompt text DEFAULT ''::text NOT NULL,
    passage_prompt text DEFAULT ''::text NOT NULL,
    vector_baseline real DEFAULT 0 NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    next_model jsonb,
    CONSTRAINT collection_models_collection_check CHECK (((collection <> ''::text) AND (length(collection) <= 256))),
    CONSTRAINT collection_models_dimension_check CHECK ((dimension > 0)),
    CONSTRAINT collection_models_model_check CHECK ((model <> ''::text)),
    CONSTRAINT collection_models_next_model_check CHECK (((next_model IS NULL) OR (jsonb_typeof(next_model) = 'object'::text))),
    CONSTRAINT collection_models_vector_baseline_check CHECK (((vector_baseline >= (0)::double precision) AND (vector_baseline < (1)::double precision)))
);

-- COMMENT: TABLE collection_models
COMMENT ON TABLE hrag.collection_models IS 'Per collection, the embedding model that made its vectors (and the one an unfinished reembed switches to)';

-- TABLE: collection_sizes
CREATE TABLE hrag.collection_sizes (
    collection text NOT NULL,
    search_targets bigint NOT NULL,
    total_tokens bigint NOT NULL
);

-- COMMENT: TABLE collection_sizes
COMMENT ON TABLE hrag.collection_sizes IS 'Per collection, its search targets (the N of the lexical IDF) and stored tokens: the sums of its rows, kept from hrag.documents by its triggers';

-- TABLE: collection_terms
CREATE TABLE hrag.collection_terms (
    collection text NOT NULL,
    term text NOT NULL,
    leaves bigint NOT NULL
);

-- COMMENT: TABLE collection_terms
COMMENT ON TABLE hrag.collection_terms IS 'Per collection and lexical term, how many search targets contain it: the sum of the term''s rows (several while writers overlap), kept from hrag.document_terms by its triggers';

-- TABLE: config
CREATE TABLE hrag.config (
    singleton boolean DEFAULT true NOT NULL,
    embedding_dim integer NOT NULL,
    created_vector_extension boolean NOT NULL,
    installed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT config_embedding_dim_check CHECK (((embedding_dim >= 1) AND (embedding_dim <= 16000))),
    CONSTRAINT config_singleton_check CHECK (singleton)
);

-- TABLE: document_terms
CREATE TABLE hrag.document_terms (
    document_id uuid NOT NULL,
    collection text NOT NULL,
    term text NOT NULL,
    leaves integer NOT NULL,
    CONSTRAINT document_terms_leaves_check CHECK ((leaves > 0))
);

-- COMMENT: TABLE document_terms
COMMENT ON TABLE hrag.document_terms IS 'Per document and lexical term, how many search targets contain it: the collection IDF statistics';

-- TABLE: documents
CREATE TABLE hrag.documents (
    id uuid NOT NULL,
    collection text DEFAULT 'default'::text NOT NULL,
    source text NOT NULL,
    title text,
    content_hash text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    search_targets integer DEFAULT 0 NOT NULL,
    total_tokens integer DEFAULT 0 NOT NULL,
    CONSTRAINT documents_collection_check CHECK (((collection <> ''::text) AND (length(collection) <= 256))),
    CONSTRAINT documents_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT documents_search_targets_check CHECK ((search_targets >= 0)),
    CONSTRAINT documents_source_check CHECK ((source <> ''::text)),
    CONSTRAINT documents_total_tokens_check CHECK ((total_tokens >= 0))
);

-- COMMENT: COLUMN documents.search_targets
COMMENT ON COLUMN hrag.documents.search_targets IS 'Number of embedded nodes of the document (the N of the lexical IDF), kept by hrag.refresh_document_terms';

-- COMMENT: COLUMN documents.total_tokens
COMMENT ON COLUMN hrag.documents.total_tokens IS 'The document''s stored tokens (its root''s subtree_tokens): a collection''s size for hrag.retrieve_hits';

-- TABLE: nodes
CREATE TABLE hrag.nodes (
    id uuid NOT NULL,
    document_id uuid NOT NULL,
    collection text NOT NULL,
    parent_id uuid,
    depth integer NOT NULL,
    parent_depth integer GENERATED ALWAYS AS ((depth - 1)) STORED,
    "position" integer NOT NULL,
    kind text NOT NULL,
    title text,
    heading_path text[] DEFAULT '{}'::text[] NOT NULL,
    content text DEFAULT ''::text NOT NULL,
    token_count integer DEFAULT 0 NOT NULL,
    child_count integer DEFAULT 0 NOT NULL,
    seq integer NOT NULL,
    subtree_end integer NOT NULL,
    content_hash text NOT NULL,
    embedding public.vector(384),
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    separator text DEFAULT '

'::text NOT NULL,
    subtree_tokens integer DEFAULT 0 NOT NULL,
    lexical_terms text[] GENERATED ALWAYS AS (
CASE
    WHEN (embedding IS NOT NULL) THEN hrag.node_lexical_terms(heading_path, content, metadata)
    ELSE NULL::text[]
END) STORED,
    lexical_hashes bigint[] GENERATED ALWAYS AS (
CASE
    WHEN (embedding IS NOT NULL) THEN hrag.term_hashes(hrag.node_lexical_terms(heading_path, content, metadata))
    ELSE NULL::bigint[]
END) STORED,
    CONSTRAINT nodes_child_count_check CHECK ((child_count >= 0)),
    CONSTRAINT nodes_depth_check CHECK ((depth >= 0)),
    CONSTRAINT nodes_kind_check CHECK ((kind ~ '^[a-z][a-z0-9_]*$'::text)),
    CONSTRAINT nodes_metadata_check CHECK ((jsonb_typeof(metadata) = 'object'::text)),
    CONSTRAINT nodes_position_check CHECK (("position" >= 0)),
    CONSTRAINT nodes_root_has_depth_zero CHECK (((parent_id IS NULL) = (depth = 0))),
    CONSTRAINT nodes_seq_check CHECK ((seq >= 0)),
    CONSTRAINT nodes_subtree_range_valid CHECK ((subtree_end >= seq)),
    CONSTRAINT nodes_subtree_tokens_check CHECK ((subtree_tokens >= 0)),
    CONSTRAINT nodes_token_count_check CHECK ((token_count >= 0))
)
WITH (autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_threshold='500');

-- COMMENT: COLUMN nodes.content
COMMENT ON COLUMN hrag.nodes.content IS 'The node''s own text only; full text = contents of seq..subtree_end joined by their separators (hrag.node_text)';

-- COMMENT: COLUMN nodes.child_count
COMMENT ON COLUMN hrag.nodes.child_count IS 'Number of direct children: the denominator of the auto-merge hit ratio';

-- COMMENT: COLUMN nodes.separator
COMMENT ON COLUMN hrag.nodes.separator IS 'Text between the previous non-empty node (in seq order) and this node''s content in the original document';

-- COMMENT: COLUMN nodes.subtree_tokens
COMMENT ON COLUMN hrag.nodes.subtree_tokens IS 'Tokens of the node''s full text (token_count of its subtree''s nodes with text, plus the separators between them that hold more than whitespace): the unit of hrag.retrieve''s budget';

-- TABLE: reembed_documents
CREATE TABLE hrag.reembed_documents (
    document_id uuid NOT NULL,
    collection text NOT NULL,
    fingerprint text NOT NULL,
    document_hash text NOT NULL,
    new_document_hash text NOT NULL,
    total_tokens integer NOT NULL,
    CONSTRAINT reembed_documents_total_tokens_check CHECK ((total_tokens >= 0))
);

-- COMMENT: TABLE reembed_documents
COMMENT ON TABLE hrag.reembed_documents IS 'Documents whose new vectors an unfinished hrag reembed has written (hrag.reembed_nodes)';

-- TABLE: reembed_nodes
CREATE TABLE hrag.reembed_nodes (
    document_id uuid NOT NULL,
    node_id uuid NOT NULL,
    collection text NOT NULL,
    embedding public.vector(384),
    token_count integer NOT NULL,
    subtree_tokens integer NOT NULL,
    content_hash text NOT NULL,
    CONSTRAINT reembed_nodes_subtree_tokens_check CHECK ((subtree_tokens >= 0)),
    CONSTRAINT reembed_nodes_token_count_check CHECK ((token_count >= 0))
);

-- COMMENT: TABLE reembed_nodes
COMMENT ON TABLE hrag.reembed_nodes IS 'The new vector, token counts and content hash of each node of a prepared document, until hrag.finish_reembed';

-- TABLE: tenant_collections
CREATE TABLE hrag.tenant_collections (
    role_name name NOT NULL,
    collection text NOT NULL
);

-- COMMENT: TABLE tenant_collections
COMMENT ON TABLE hrag.tenant_collections IS 'Roles bound to collections: a bound role sees only its collections (row-level security)';

-- CONSTRAINT: alembic_version alembic_version_pkc
ALTER TABLE ONLY hrag.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);

-- CONSTRAINT: collection_models collection_models_pkey
ALTER TABLE ONLY hrag.collection_models
    ADD CONSTRAINT collection_models_pkey PRIMARY KEY (collection);

-- CONSTRAINT: config config_pkey
ALTER TABLE ONLY hrag.config
    ADD CONSTRAINT config_pkey PRIMARY KEY (singleton);

-- CONSTRAINT: document_terms document_terms_pkey
ALTER TABLE ONLY hrag.document_terms
    ADD CONSTRAINT document_terms_pkey PRIMARY KEY (document_id, term);

-- CONSTRAINT: documents documents_collection_source_key
ALTER TABLE ONLY hrag.documents
    ADD CONSTRAINT documents_collection_source_key UNIQUE (collection, source);

-- CONSTRAINT: documents documents_id_collection_key
ALTER TABLE ONLY hrag.documents
    ADD CONSTRAINT documents_id_collection_key UNIQUE (id, collection);

-- CONSTRAINT: documents documents_pkey
ALTER TABLE ONLY hrag.documents
    ADD CONSTRAINT documents_pkey PRIMARY KEY (id);

-- CONSTRAINT: nodes nodes_id_document_depth_key
ALTER TABLE ONLY hrag.nodes
    ADD CONSTRAINT nodes_id_document_depth_key UNIQUE (id, document_id, depth);

-- CONSTRAINT: nodes nodes_pkey
ALTER TABLE ONLY hrag.nodes
    ADD CONSTRAINT nodes_pkey PRIMARY KEY (document_id, id);

-- CONSTRAINT: nodes nodes_unique_seq
ALTER TABLE ONLY hrag.nodes
    ADD CONSTRAINT nodes_unique_seq UNIQUE (document_id, seq);

-- CONSTRAINT: reembed_documents reembed_documents_pkey
ALTER TABLE ONLY hrag.reembed_documents
    ADD CONSTRAINT reembed_documents_pkey PRIMARY KEY (document_id);

-- CONSTRAINT: reembed_nodes reembed_nodes_pkey
ALTER TABLE ONLY hrag.reembed_nodes
    ADD CONSTRAINT reembed_nodes_pkey PRIMARY KEY (document_id, node_id);

-- CONSTRAINT: tenant_collections tenant_collections_pkey
ALTER TABLE ONLY hrag.tenant_collections
    ADD CONSTRAINT tenant_collections_pkey PRIMARY KEY (role_name, collection);

-- INDEX: collection_sizes_collection_idx
CREATE INDEX collection_sizes_collection_idx ON hrag.collection_sizes USING btree (collection) INCLUDE (search_targets, total_tokens);

-- INDEX: collection_terms_term_idx
CREATE INDEX collection_terms_term_idx ON hrag.collection_terms USING btree (term, collection) INCLUDE (leaves);

-- INDEX: document_terms_term_idx
CREATE INDEX document_terms_term_idx ON hrag.document_terms USING btree (term, collection) INCLUDE (leaves);

-- INDEX: documents_metadata_idx
CREATE INDEX documents_metadata_idx ON hrag.documents USING gin (metadata jsonb_path_ops);

-- INDEX: nodes_collection_idx
CREATE INDEX nodes_collection_idx ON hrag.nodes USING btree (collection) WHERE (embedding IS NOT NULL);

-- INDEX: nodes_embedding_hnsw_idx
CREATE INDEX nodes_embedding_hnsw_idx ON hrag.nodes USING hnsw (embedding public.vector_cosine_ops) WITH (m='16', ef_construction='64');

-- INDEX: nodes_lexical_hashes_idx
CREATE INDEX nodes_lexical_hashes_idx ON hrag.nodes USING gin (lexical_hashes) WITH (fastupdate=off) WHERE (lexical_hashes IS NOT NULL);

-- INDEX: nodes_metadata_idx
CREATE INDEX nodes_metadata_idx ON hrag.nodes USING gin (metadata jsonb_path_ops);

-- INDEX: nodes_parent_idx
CREATE INDEX nodes_parent_idx ON hrag.nodes USING btree (parent_id, "position");

-- INDEX: reembed_documents_collection_idx
CREATE INDEX reembed_documents_collection_idx ON hrag.reembed_documents USING btree (collection);

-- TRIGGER: document_terms document_terms_deleted
CREATE TRIGGER document_terms_deleted AFTER DELETE ON hrag.document_terms REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();

-- TRIGGER: document_terms document_terms_inserted
CREATE TRIGGER document_terms_inserted AFTER INSERT ON hrag.document_terms REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();

-- TRIGGER: document_terms document_terms_truncated
CREATE TRIGGER document_terms_truncated AFTER TRUNCATE ON hrag.document_terms FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();

-- TRIGGER: document_terms document_terms_updated
CREATE TRIGGER document_terms_updated AFTER UPDATE ON hrag.document_terms REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();

-- TRIGGER: documents documents_deleted
CREATE TRIGGER documents_deleted AFTER DELETE ON hrag.documents REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();

-- TRIGGER: documents documents_inserted
CREATE TRIGGER documents_inserted AFTER INSERT ON hrag.documents REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();

-- TRIGGER: documents documents_truncated
CREATE TRIGGER documents_truncated AFTER TRUNCATE ON hrag.documents FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();

-- TRIGGER: documents documents_updated
CREATE TRIGGER documents_updated AFTER UPDATE ON hrag.documents REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();

-- FK CONSTRAINT: document_terms document_terms_document_id_collection_fkey
ALTER TABLE ONLY hrag.document_terms
    ADD CONSTRAINT document_terms_document_id_collection_fkey FOREIGN KEY (document_id, collection) REFERENCES hrag.documents(id, collection) ON DELETE CASCADE;

-- FK CONSTRAINT: nodes nodes_document_fk
ALTER TABLE ONLY hrag.nodes
    ADD CONSTRAINT nodes_document_fk FOREIGN KEY (document_id, collection) REFERENCES hrag.documents(id, collection) ON DELETE CASCADE;

-- FK CONSTRAINT: nodes nodes_parent_fk
ALTER TABLE ONLY hrag.nodes
    ADD CONSTRAINT nodes_parent_fk FOREIGN KEY (parent_id, document_id, parent_depth) REFERENCES hrag.nodes(id, document_id, depth) ON DELETE CASCADE;

-- FK CONSTRAINT: reembed_documents reembed_documents_document_id_fkey
ALTER TABLE ONLY hrag.reembed_documents
    ADD CONSTRAINT reembed_documents_document_id_fkey FOREIGN KEY (document_id) REFERENCES hrag.documents(id) ON DELETE CASCADE;

-- FK CONSTRAINT: reembed_nodes reembed_nodes_document_id_fkey
ALTER TABLE ONLY hrag.reembed_nodes
    ADD CONSTRAINT reembed_nodes_document_id_fkey FOREIGN KEY (document_id) REFERENCES hrag.reembed_documents(document_id) ON DELETE CASCADE;

-- ROW SECURITY: collection_models
ALTER TABLE hrag.collection_models ENABLE ROW LEVEL SECURITY;

-- POLICY: collection_models collection_models_by_collection
CREATE POLICY collection_models_by_collection ON hrag.collection_models USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: collection_sizes
ALTER TABLE hrag.collection_sizes ENABLE ROW LEVEL SECURITY;

-- POLICY: collection_sizes collection_sizes_by_collection
CREATE POLICY collection_sizes_by_collection ON hrag.collection_sizes USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: collection_terms
ALTER TABLE hrag.collection_terms ENABLE ROW LEVEL SECURITY;

-- POLICY: collection_terms collection_terms_by_collection
CREATE POLICY collection_terms_by_collection ON hrag.collection_terms USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: document_terms
ALTER TABLE hrag.document_terms ENABLE ROW LEVEL SECURITY;

-- POLICY: document_terms document_terms_by_collection
CREATE POLICY document_terms_by_collection ON hrag.document_terms USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: documents
ALTER TABLE hrag.documents ENABLE ROW LEVEL SECURITY;

-- POLICY: documents documents_by_collection
CREATE POLICY documents_by_collection ON hrag.documents USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: nodes
ALTER TABLE hrag.nodes ENABLE ROW LEVEL SECURITY;

-- POLICY: nodes nodes_by_collection
CREATE POLICY nodes_by_collection ON hrag.nodes USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: reembed_documents
ALTER TABLE hrag.reembed_documents ENABLE ROW LEVEL SECURITY;

-- POLICY: reembed_documents reembed_documents_by_collection
CREATE POLICY reembed_documents_by_collection ON hrag.reembed_documents USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: reembed_nodes
ALTER TABLE hrag.reembed_nodes ENABLE ROW LEVEL SECURITY;

-- POLICY: reembed_nodes reembed_nodes_by_collection
CREATE POLICY reembed_nodes_by_collection ON hrag.reembed_nodes USING (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[])))) WITH CHECK (((( SELECT hrag.visible_collections() AS visible_collections) IS NULL) OR (collection = ANY (( SELECT hrag.visible_collections() AS visible_collections)::text[]))));

-- ROW SECURITY: tenant_collections
ALTER TABLE hrag.tenant_collections ENABLE ROW LEVEL SECURITY;

-- POLICY: tenant_collections tenant_collections_own
CREATE POLICY tenant_collections_own ON hrag.tenant_collections USING ((EXISTS ( SELECT 1
   FROM pg_roles r
  WHERE ((r.rolname = tenant_collections.role_name) AND pg_has_role(CURRENT_USER, r.oid, 'MEMBER'::text)))));

-- ACL: FUNCTION _create_vector_index()
REVOKE ALL ON FUNCTION hrag._create_vector_index() FROM PUBLIC;

-- ACL: FUNCTION _drop_invalid_vector_indexes()
REVOKE ALL ON FUNCTION hrag._drop_invalid_vector_indexes() FROM PUBLIC;

-- ACL: FUNCTION _repair_document(doc uuid)
REVOKE ALL ON FUNCTION hrag._repair_document(doc uuid) FROM PUBLIC;

-- ACL: FUNCTION create_tenant_role(role_name name, collections text[], can_write boolean)
REVOKE ALL ON FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean) FROM PUBLIC;

-- ACL: FUNCTION distribute(shard_count integer)
REVOKE ALL ON FUNCTION hrag.distribute(shard_count integer) FROM PUBLIC;

-- ACL: FUNCTION grant_reader(role_name name)
REVOKE ALL ON FUNCTION hrag.grant_reader(role_name name) FROM PUBLIC;

-- ACL: FUNCTION repair_integrity()
REVOKE ALL ON FUNCTION hrag.repair_integrity() FROM PUBLIC;

-- ACL: TABLE collection_sizes
GRANT SELECT ON TABLE hrag.collection_sizes TO pg_read_all_data;

-- ACL: TABLE collection_terms
GRANT SELECT ON TABLE hrag.collection_terms TO pg_read_all_data;

-- ACL: TABLE tenant_collections
GRANT SELECT ON TABLE hrag.tenant_collections TO PUBLIC;
