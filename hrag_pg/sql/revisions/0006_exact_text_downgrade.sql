-- Undo revision 0006: the previous text assembly, integrity functions and comments.
-- The previous definitions, as revisions 0002 and 0004 created them.
-- Current definitions: hrag_pg/sql/text.sql, vector_index.sql, integrity.sql.

CREATE OR REPLACE FUNCTION hrag.node_text(node_id uuid)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(
               (SELECT string_agg(d.content, E'\n\n' ORDER BY d.seq)
                  FROM hrag.nodes d
                 WHERE d.document_id = n.document_id
                   AND d.seq BETWEEN n.seq AND n.subtree_end
                   AND d.content <> ''),
               '')
      FROM hrag.nodes n
     WHERE n.id = node_text.node_id
$$;

CREATE OR REPLACE FUNCTION hrag.auto_merge_hits(
    node_ids        uuid[],
    scores          real[],
    merge_threshold real DEFAULT 0.5
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer)
LANGUAGE sql STABLE
AS $$
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
          JOIN hrag.nodes n ON n.id = hit.id
        UNION ALL
        SELECT c.hit, c.score, p.id, p.parent_id, p.depth, p.child_count, c.steps + 1
          FROM chain c
          JOIN hrag.nodes p ON p.id = c.parent_id
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
    SELECT n.id, n.document_id, n.depth, n.title, n.heading_path,
           coalesce(full_text.text, ''),
           r.score, r.merged_from,
           (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top),
           (row_number() OVER (ORDER BY r.score DESC, n.depth, n.id))::integer
      FROM result r
      JOIN hrag.nodes n ON n.id = r.top
      -- full text: one range scan of the (document_id, seq) index
      LEFT JOIN LATERAL (SELECT string_agg(d.content, E'\n\n' ORDER BY d.seq) AS text
                           FROM hrag.nodes d
                          WHERE d.document_id = n.document_id
                            AND d.seq BETWEEN n.seq AND n.subtree_end
                            AND d.content <> '') AS full_text ON true
     -- The argument checks: a constant qual of the top query, evaluated once
     -- before any row (a CTE the plan never reads from would never run them).
     WHERE hrag._check_hits(node_ids, scores) AND hrag._check_threshold(merge_threshold)
     ORDER BY r.score DESC, n.depth, n.id
$$;

CREATE OR REPLACE FUNCTION hrag.check_integrity()
RETURNS TABLE (problem text, document_id uuid, node_id uuid, detail text)
LANGUAGE sql STABLE
AS $$
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
      LEFT JOIN (SELECT parent_id, count(*) AS actual FROM hrag.nodes GROUP BY parent_id) c
             ON c.parent_id = n.id
     WHERE n.child_count <> coalesce(c.actual, 0)
    UNION ALL
    -- depth (normally guaranteed by the parent FK)
    SELECT 'wrong_depth', n.document_id, n.id,
           format('depth is %s, its parent''s is %s', n.depth, p.depth)
      FROM hrag.nodes n
      JOIN hrag.nodes p ON p.id = n.parent_id
     WHERE n.depth <> p.depth + 1
    UNION ALL
    -- pre-order ranges: a root starts at 0; a first child right after its
    -- parent; a later child right after its previous sibling's subtree; a
    -- subtree ends where its last child's does (or at itself for a leaf)
    SELECT 'broken_ordering', n.document_id, n.id,
           format('seq %s / subtree_end %s, expected %s / %s', n.seq, n.subtree_end,
                  expected.seq, expected.subtree_end)
      FROM hrag.nodes n
      CROSS JOIN LATERAL (
          SELECT CASE
                     WHEN n.parent_id IS NULL THEN 0
                     WHEN n.position = 0 THEN (SELECT max(p.seq) + 1 FROM hrag.nodes p WHERE p.id = n.parent_id)
                     ELSE (SELECT max(s.subtree_end) + 1 FROM hrag.nodes s
                            WHERE s.parent_id = n.parent_id AND s.position = n.position - 1)
                 END AS seq,
                 coalesce((SELECT max(c.subtree_end) FROM hrag.nodes c WHERE c.parent_id = n.id), n.seq)
                     AS subtree_end
      ) AS expected
     WHERE n.seq IS DISTINCT FROM expected.seq OR n.subtree_end IS DISTINCT FROM expected.subtree_end
    UNION ALL
    -- every leaf below the root is a search target
    SELECT 'leaf_without_embedding', n.document_id, n.id,
           format('%s leaf at depth %s has no embedding: re-ingest its document with --force', n.kind, n.depth)
      FROM hrag.nodes n
     WHERE n.embedding IS NULL
       AND n.depth > 0
       AND NOT EXISTS (SELECT 1 FROM hrag.nodes c WHERE c.parent_id = n.id)
$$;

CREATE OR REPLACE FUNCTION hrag.repair_integrity()
RETURNS TABLE (problem text, fixed bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n_counts bigint;
    n_order  bigint;
    n_depth  bigint;
BEGIN
    UPDATE hrag.nodes n
       SET child_count = coalesce(c.actual, 0)
      FROM hrag.nodes m
      LEFT JOIN (SELECT parent_id, count(*) AS actual FROM hrag.nodes GROUP BY parent_id) c
             ON c.parent_id = m.id
     WHERE n.id = m.id AND n.child_count <> coalesce(c.actual, 0);
    GET DIAGNOSTICS n_counts = ROW_COUNT;

    -- Renumber documents whose ranges or depths disagree: walk each tree in
    -- sibling order (position, then id for ties), number in pre-order, count
    -- descendants for subtree_end and ancestors for depth.
    CREATE TEMP TABLE hrag_renumber ON COMMIT DROP AS
    WITH RECURSIVE bad AS (
        SELECT DISTINCT c.document_id FROM hrag.check_integrity() c
         WHERE c.problem IN ('broken_ordering', 'wrong_depth')
    ),
    walk AS (
        SELECT n.id, n.document_id, ARRAY[n.id] AS ancestors,
               ARRAY[lpad(n.position::text, 10, '0') || n.id::text] AS sort_path
          FROM hrag.nodes n JOIN bad USING (document_id)
         WHERE n.parent_id IS NULL
        UNION ALL
        SELECT c.id, c.document_id, w.ancestors || c.id,
               w.sort_path || (lpad(c.position::text, 10, '0') || c.id::text)
          FROM walk w JOIN hrag.nodes c ON c.parent_id = w.id
    ),
    numbered AS (
        SELECT w.*, (row_number() OVER (PARTITION BY w.document_id ORDER BY w.sort_path) - 1)::int AS new_seq
          FROM walk w
    )
    SELECT x.id, x.document_id, x.new_seq, cardinality(x.ancestors) - 1 AS new_depth,
           x.new_seq + (SELECT count(*) FROM numbered y WHERE x.id = ANY (y.ancestors) AND y.id <> x.id)::int
               AS new_end
      FROM numbered x;

    -- Depths first, in one statement: the parent FK (NO ACTION) is checked
    -- when it ends, and later updates re-check the FK of the rows they touch.
    UPDATE hrag.nodes n
       SET depth = r.new_depth
      FROM hrag_renumber r
     WHERE n.id = r.id AND n.depth <> r.new_depth;
    GET DIAGNOSTICS n_depth = ROW_COUNT;

    -- Two steps so the (document_id, seq) unique constraint holds throughout.
    UPDATE hrag.nodes n
       SET seq = n.seq + 1000000000, subtree_end = n.seq + 1000000000
      FROM hrag_renumber r
     WHERE n.id = r.id;
    UPDATE hrag.nodes n
       SET seq = r.new_seq, subtree_end = r.new_end
      FROM hrag_renumber r
     WHERE n.id = r.id;
    SELECT count(DISTINCT r.document_id) INTO n_order FROM hrag_renumber r;

    RETURN QUERY VALUES ('wrong_child_count', n_counts), ('broken_ordering', n_order), ('wrong_depth', n_depth);
END
$$;

DROP FUNCTION hrag._drop_invalid_vector_indexes();
DROP FUNCTION hrag._vector_index_state();
DROP FUNCTION hrag._create_vector_index();
DROP FUNCTION hrag._subtree_text(uuid, integer, integer);
ALTER TABLE hrag.nodes DROP COLUMN separator;
COMMENT ON COLUMN hrag.nodes.content IS
    'The node''s own text only; full text = contents of seq..subtree_end in order (hrag.node_text)';

COMMENT ON FUNCTION hrag.node_text(uuid) IS NULL;
COMMENT ON FUNCTION hrag.search_leaves(vector, integer, text, jsonb) IS NULL;
COMMENT ON FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) IS NULL;
COMMENT ON FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) IS NULL;
COMMENT ON FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) IS NULL;
COMMENT ON FUNCTION hrag.auto_merge_hits(uuid[], real[], real) IS NULL;
COMMENT ON FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) IS NULL;
COMMENT ON FUNCTION hrag.lexical_terms(text) IS NULL;
COMMENT ON FUNCTION hrag.node_lexical_terms(text[], text, jsonb) IS NULL;
COMMENT ON FUNCTION hrag.check_integrity() IS NULL;
COMMENT ON FUNCTION hrag.repair_integrity() IS NULL;
COMMENT ON FUNCTION hrag.visible_collections() IS NULL;
COMMENT ON FUNCTION hrag.grant_reader(name) IS NULL;
COMMENT ON FUNCTION hrag.create_tenant_role(name, text[], boolean) IS NULL;
COMMENT ON FUNCTION hrag._check_query(vector, jsonb) IS NULL;
COMMENT ON FUNCTION hrag._check_count(integer, text, integer) IS NULL;
COMMENT ON FUNCTION hrag._check_hits(uuid[], real[]) IS NULL;
COMMENT ON FUNCTION hrag._check_threshold(real) IS NULL;
