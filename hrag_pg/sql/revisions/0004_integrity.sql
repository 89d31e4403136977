-- Revision 0004: check_integrity and repair_integrity, for what constraints
-- cannot express (child counts, pre-order ranges, searchable leaves, one root).
-- Current definitions: hrag_pg/sql/integrity.sql;
-- reasoning: docs/decisions.md, "Depth and document consistency by foreign keys, not triggers".

-- ---------------------------------------------------------------------------
-- hrag.check_integrity: one row per problem (none on a healthy database).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.check_integrity()
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

-- ---------------------------------------------------------------------------
-- hrag.repair_integrity: recompute what can be recomputed, in one statement
-- per kind, and report what was fixed.  Missing embeddings and rootless
-- documents cannot be recomputed in SQL; they are left for re-ingestion and
-- still reported by check_integrity afterwards.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.repair_integrity()
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
