-- Undo revision 0011: revision 0010's per-document steps and coordinator loops,
-- verbatim (one call per document on a single node too).
-- Current definitions: hrag_pg/sql/text.sql, merge.sql, parent_child.sql, budget.sql.

CREATE OR REPLACE FUNCTION hrag._node_rows_document(doc uuid, node_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens, n.child_count
          FROM hrag.nodes n
         WHERE n.document_id = doc AND n.id = ANY (node_ids)
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
        token_count := x.subtree_tokens;
        child_count := x.child_count;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Per document of document_ids, the rows of the nodes node_ids holds there.
CREATE OR REPLACE FUNCTION hrag._node_rows_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        doc_ids := ARRAY(SELECT h.id FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
                          WHERE h.doc = this_doc ORDER BY h.ord);
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._node_rows_document(this_doc, doc_ids);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._auto_merge_document(
    doc             uuid,
    node_ids        uuid[],
    scores          real[],
    merge_threshold real
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
LANGUAGE plpgsql STABLE
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
            SELECT hit.id AS hit, hit.score, n.id AS node, n.parent_id, n.depth, n.child_count, 0 AS steps
              FROM hit
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = hit.id
            UNION ALL
            SELECT c.hit, c.score, p.id, p.parent_id, p.depth, p.child_count, c.steps + 1
              FROM chain c
              JOIN hrag.nodes p ON p.document_id = doc AND p.id = c.parent_id
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
            SELECT DISTINCT ON (c.hit) c.hit, c.score, c.node AS top
              FROM chain c, final f
             WHERE c.node = ANY (f.covered)
             ORDER BY c.hit, c.steps DESC
        ),
        result AS (
            SELECT pl.top,
                   max(pl.score) AS score,
                   coalesce(array_agg(pl.hit ORDER BY pl.score DESC, pl.hit) FILTER (WHERE pl.hit <> pl.top), '{}')
                       AS merged_from
              FROM placed pl
             GROUP BY pl.top
        )
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, r.score, r.merged_from,
               (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top)
                   AS hit_ratio,
               n.subtree_tokens
          FROM result r
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = r.top
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
        score := x.score;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc   uuid;
    doc_ids    uuid[];
    doc_scores real[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord) INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._auto_merge_document(this_doc, doc_ids, doc_scores, merge_threshold);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._parents_document(doc uuid, node_ids uuid[], ords bigint[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT doc, h.ord, up.id, up.seq, up.subtree_end
      FROM unnest(node_ids, ords) AS h(id, ord)
      JOIN hrag.nodes n ON n.document_id = doc AND n.id = h.id
      JOIN hrag.nodes p ON p.document_id = doc AND p.id = n.parent_id
      JOIN hrag.nodes up ON up.document_id = doc
                        AND up.id = CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END;
END
$$;

CREATE OR REPLACE FUNCTION hrag._parents_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
    doc_ords bigint[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.ord ORDER BY h.ord) INTO doc_ids, doc_ords
          FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._parents_document(this_doc, doc_ids, doc_ords);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._budget_candidates_document(doc uuid, node_ids uuid[], scores real[],
                                                 weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE
    chain AS (
        SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.parent_id
          FROM unnest(node_ids, scores, weights) AS w(id, score, weight)
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = w.id
        UNION ALL
        SELECT c.hit, c.score, c.weight, p.id, p.parent_id
          FROM chain c
          JOIN hrag.nodes p ON p.document_id = doc AND p.id = c.parent_id
    ),
    cand AS (
        SELECT c.node, sum(c.weight) AS evidence, max(c.score) AS best, count(*) AS hits
          FROM chain c
         GROUP BY c.node
    )
    SELECT cand.node, doc, cand.evidence, cand.best, cand.hits, n.seq, n.subtree_end,
           n.subtree_tokens, n.child_count, n.depth
      FROM cand
      JOIN hrag.nodes n ON n.document_id = doc AND n.id = cand.node;
END
$$;

CREATE OR REPLACE FUNCTION hrag._budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[],
                                             weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc    uuid;
    doc_ids     uuid[];
    doc_scores  real[];
    doc_weights double precision[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord), array_agg(h.weight ORDER BY h.ord)
          INTO doc_ids, doc_scores, doc_weights
          FROM unnest(node_ids, document_ids, scores, weights) WITH ORDINALITY AS h(id, doc, score, weight, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._budget_candidates_document(this_doc, doc_ids, doc_scores, doc_weights);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], node_ids uuid[],
                                           scores real[], over_budget boolean)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        WITH hit AS (
            SELECT n.id, n.seq, max(h.score) AS score
              FROM unnest(node_ids, scores) AS h(id, score)
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = h.id
             GROUP BY n.id, n.seq
        ),
        picked AS (
            SELECT n.id, n.seq, n.subtree_end, pk.why
              FROM unnest(picked_ids, picked_why) AS pk(id, why)
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = pk.id
        ),
        -- the hits inside each picked node, and how many of its children lead to one
        absorbed AS (
            SELECT p.id,
                   max(hit.score) AS best,
                   coalesce(array_agg(hit.id ORDER BY hit.score DESC, hit.id) FILTER (WHERE hit.id <> p.id), '{}')
                       AS merged_from,
                   count(*) AS hits_inside,
                   count(DISTINCT child.id) AS children_hit
              FROM picked p
              JOIN hit ON hit.seq BETWEEN p.seq AND p.subtree_end
              LEFT JOIN LATERAL (SELECT a.id FROM hrag.nodes a
                                  WHERE a.parent_id = p.id AND a.document_id = doc
                                    AND hit.seq BETWEEN a.seq AND a.subtree_end) AS child ON true
             GROUP BY p.id
        )
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end,
               a.best::real AS best, a.merged_from,
               CASE WHEN n.child_count > 0 THEN (a.children_hit::real / n.child_count)::real END AS hit_ratio,
               n.subtree_tokens,
               CASE WHEN over_budget THEN p.why
                    WHEN p.why = 'hit' THEN 'direct hit'
                    ELSE format('%s of %s children hit, %s hits inside', a.children_hit, n.child_count, a.hits_inside)
               END AS reason
          FROM picked p
          JOIN absorbed a ON a.id = p.id
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = p.id
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
        score := x.best;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        reason := x.reason;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag._budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[],
                                       node_ids uuid[], document_ids uuid[], scores real[], over_budget boolean)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc   uuid;
    doc_picked uuid[];
    doc_why    text[];
    doc_ids    uuid[];
    doc_scores real[];
BEGIN
    FOR this_doc IN SELECT DISTINCT p.doc FROM unnest(picked_docs) AS p(doc) WHERE p.doc IS NOT NULL LOOP
        SELECT array_agg(p.id ORDER BY p.ord), array_agg(p.why ORDER BY p.ord) INTO doc_picked, doc_why
          FROM unnest(picked_ids, picked_docs, picked_why) WITH ORDINALITY AS p(id, doc, why, ord)
         WHERE p.doc = this_doc;
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.score ORDER BY h.ord), '{}')
          INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._budget_rows_document(this_doc, doc_picked, doc_why, doc_ids, doc_scores,
                                                              over_budget);
    END LOOP;
END
$$;

-- CREATE OR REPLACE resets a function's row estimate.
ALTER FUNCTION hrag._node_rows_document(uuid, uuid[]) ROWS 4;
ALTER FUNCTION hrag._node_rows_each(uuid[], uuid[]) ROWS 4;
ALTER FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) ROWS 30;
ALTER FUNCTION hrag._parents_each(uuid[], uuid[]) ROWS 30;
ALTER FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) ROWS 10;
ALTER FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) ROWS 10;

COMMENT ON FUNCTION hrag._node_rows_document(uuid, uuid[]) IS
    'internal: per document (one shard on Citus), nodes with their full text, not part of the API';
COMMENT ON FUNCTION hrag._node_rows_each(uuid[], uuid[]) IS
    'internal: hrag._node_rows_document for each document of the nodes, not part of the API';
COMMENT ON FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) IS
    'internal: per document (one shard on Citus), the recursive auto-merge of one document''s hits, not part of the API';
COMMENT ON FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) IS
    'internal: hrag._auto_merge_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) IS
    'internal: per document (one shard on Citus), the parent each hit expands to, not part of the API';
COMMENT ON FUNCTION hrag._parents_each(uuid[], uuid[]) IS
    'internal: hrag._parents_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) IS
    'internal: per document (one shard on Citus), the budget mode''s candidates on the hits'' paths, not part of the API';
COMMENT ON FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) IS
    'internal: hrag._budget_candidates_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) IS
    'internal: per document (one shard on Citus), the chosen nodes with what they absorbed, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) IS
    'internal: hrag._budget_rows_document for each document of the chosen nodes, not part of the API';
