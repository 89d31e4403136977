-- Revision 0022: markup leaves (text no reader sees, before the first node or
-- after the last) are stored but not search targets; check_integrity accepts
-- them without an embedding.  The downgrade reports them again.
-- Current definitions: hrag_pg/sql/integrity.sql;
-- measurements: docs/decisions.md, "Markup is text, not a search target".

CREATE OR REPLACE FUNCTION hrag.check_integrity() RETURNS TABLE(problem text, document_id uuid, node_id uuid, detail text)
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

COMMENT ON FUNCTION hrag.check_integrity() IS 'One row per problem: vector index, roots, child counts, pre-order ranges, depths, leaves without embedding (markup leaves excepted), term statistics';
