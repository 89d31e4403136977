-- hrag-pg, merge.sql: Auto-Merging: hit leaves are replaced by their parent
-- where enough of its children are hit, recursively upward.
--
--   hrag.sample_hits: how many hits a merge should take (the Python API's k)
--   hrag.auto_merge(question) -> search_leaves (search.sql) -> _auto_merge_ranked
--   hrag.auto_merge_hits(hits) -> _document_ids (common.sql) -> _auto_merge_ranked
--   _auto_merge_ranked -> _auto_merge_each -> _auto_merge_document -> text.sql
-- Budgets: _fit_budget (budget.sql).
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.sample_hits (last changed in revision 0021)
-- k, but at most max_share of the collection's search targets: thirty hits
-- in a small collection land everywhere and merge it into whole documents
-- (docs/decisions.md, "Auto-merge takes at most a tenth of a small
-- collection as hits").  The size comes from the maintained statistics.
CREATE OR REPLACE FUNCTION hrag.sample_hits(k integer, collection text DEFAULT NULL, max_share real DEFAULT 0.1)
RETURNS integer
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
COMMENT ON FUNCTION hrag.sample_hits(integer, text, real) IS
    'How many hits a merge should take: k, but at most max_share of the collection''s search targets';

-- hrag.auto_merge (last changed in revision 0010)
-- Auto-merge for a question: search_leaves, then the merge, one round trip.
CREATE OR REPLACE FUNCTION hrag.auto_merge(
    query           vector,
    top_k           integer DEFAULT 12,
    merge_threshold real    DEFAULT 0.5,
    collection      text    DEFAULT NULL,
    filter          jsonb   DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
LANGUAGE sql STABLE
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
ALTER FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) ROWS 10;
COMMENT ON FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) IS
    'Auto-merging: hit leaves, replace them by their parent where hit children / children >= merge_threshold, upward';

-- hrag.auto_merge_hits (last changed in revision 0010)
-- Auto-merge for hits from anywhere, after looking up each hit's document.
CREATE OR REPLACE FUNCTION hrag.auto_merge_hits(
    node_ids        uuid[],
    scores          real[],
    merge_threshold real DEFAULT 0.5
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY
    SELECT * FROM hrag._auto_merge_ranked(node_ids, hrag._document_ids(node_ids), scores, merge_threshold);
END
$$;
ALTER FUNCTION hrag.auto_merge_hits(uuid[], real[], real) ROWS 10;
COMMENT ON FUNCTION hrag.auto_merge_hits(uuid[], real[], real) IS
    'The auto-merge for hits from elsewhere (a reranker, a keyword search), with why each node was returned';

-- hrag._auto_merge_ranked (last changed in revision 0010)
-- The coordinator step: the documents' merged results in rank order (score,
-- then the larger node, then id, so equal scores rank the same every time).
CREATE OR REPLACE FUNCTION hrag._auto_merge_ranked(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
LANGUAGE plpgsql STABLE
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
ALTER FUNCTION hrag._auto_merge_ranked(uuid[], uuid[], real[], real) ROWS 10;
COMMENT ON FUNCTION hrag._auto_merge_ranked(uuid[], uuid[], real[], real) IS
    'internal: the auto-merge of hits with their documents, in rank order, not part of the API';

-- hrag._auto_merge_document (last changed in revision 0011)
-- The merge in one document (doc NULL: every document): bottom-up, a parent
-- replaces its children when at least merge_threshold of them are hit or
-- merged (inclusive: docs/decisions.md, "Inclusive merge threshold"); its
-- score is the best hit it absorbed.  Only the nodes on the hits' paths are
-- read, by primary key.
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
ALTER FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) ROWS 10;
COMMENT ON FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the recursive auto-merge of one document''s hits, not part of the API';

-- hrag._auto_merge_each (last changed in revision 0011)
-- Splits the hits by document for _auto_merge_document where hrag.nodes is
-- distributed (one worker each); elsewhere one call takes them all.
CREATE OR REPLACE FUNCTION hrag._auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
LANGUAGE plpgsql STABLE
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
ALTER FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) ROWS 10;
COMMENT ON FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) IS
    'internal: hrag._auto_merge_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';
