-- hrag-pg, integrity.sql: checking and repairing what the tree's layout
-- depends on (tables.sql): child counts, pre-order ranges, depths, embedded
-- leaves, the vector index (vector_index.sql) and the lexical sums
-- (lexical.sql).  hrag.check_integrity reports one row per problem and
-- changes nothing; hrag.repair_integrity fixes what can be recomputed from
-- the rows, one document at a time (_repair_document).
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.check_integrity (last changed in revision 0029)
-- Every stored fact the modes trust without checking (child_count, seq and
-- subtree_end, depth, an embedding on every search target, a valid HNSW
-- index, the per-collection sums, one root per document), compared with what
-- the rows say: a wrong range would silently return the wrong text.
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
    -- reader sees, such as a link's target: docs/decisions.md, "Markup is
    -- text, not a search target")
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
           format('collection %s: hrag.collection_sizes counts %s search targets and %s tokens%s, '
                  'its documents %s and %s: run hrag check --repair',
                  coalesce(c.collection, a.collection), coalesce(c.targets, 0), coalesce(c.tokens, 0),
                  CASE WHEN NOT x.directions_agree THEN ' and another sum of directions' ELSE '' END,
                  coalesce(a.targets, 0), coalesce(a.tokens, 0))
      FROM (SELECT s.collection, sum(s.search_targets)::bigint AS targets, sum(s.total_tokens)::bigint AS tokens,
                   sum(s.embedding_sum) AS directions
              FROM hrag.collection_sizes s GROUP BY s.collection) AS c
      FULL JOIN (SELECT d.collection, sum(d.search_targets)::bigint AS targets,
                        sum(d.total_tokens)::bigint AS tokens, sum(d.embedding_sum) AS directions
                   FROM hrag.documents d GROUP BY d.collection) AS a ON a.collection = c.collection
     -- (sums of float vectors drift a little as writers add and subtract: a
     -- thousandth of a unit vector per search target is not a problem)
     CROSS JOIN LATERAL (
        SELECT CASE WHEN c.directions IS NULL AND a.directions IS NULL THEN true
                    WHEN c.directions IS NULL THEN vector_norm(a.directions) <= 1e-3 * greatest(a.targets, 1)
                    WHEN a.directions IS NULL THEN vector_norm(c.directions) <= 1e-3 * greatest(c.targets, 1)
                    ELSE l2_distance(c.directions, a.directions) <= 1e-3 * greatest(a.targets, 1)
               END AS directions_agree) AS x
     WHERE coalesce(c.targets, 0) <> coalesce(a.targets, 0) OR coalesce(c.tokens, 0) <> coalesce(a.tokens, 0)
        OR NOT x.directions_agree;
END
$$;
COMMENT ON FUNCTION hrag.check_integrity() IS 'One row per problem: vector index, roots, child counts, pre-order ranges, depths, leaves without embedding (markup leaves excepted), term statistics';

-- hrag.repair_integrity (last changed in revision 0021)
-- Rebuilds a missing or invalid vector index, repairs each document whose
-- facts are off (_repair_document), and rebuilds the lexical sums; returns
-- what it fixed.  Owner only: it locks tables and rewrites rows.
CREATE OR REPLACE FUNCTION hrag.repair_integrity() RETURNS TABLE(problem text, fixed bigint)
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
COMMENT ON FUNCTION hrag.repair_integrity() IS
    'Recompute child counts, ranges and depths and rebuild a missing vector index; returns what was fixed';
REVOKE ALL ON FUNCTION hrag.repair_integrity() FROM PUBLIC;

-- hrag._repair_document (last changed in revision 0017)
-- One document's child counts, pre-order ranges and depths, recomputed from
-- parent_id and position.  Per document, so a large installation is repaired
-- in short statements and on Citus each runs on one shard.
CREATE OR REPLACE FUNCTION hrag._repair_document(doc uuid)
RETURNS TABLE (wrong_child_count bigint, broken_ordering bigint, wrong_depth bigint)
LANGUAGE plpgsql VOLATILE
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
COMMENT ON FUNCTION hrag._repair_document(uuid) IS
    'internal: recompute one document''s child counts, pre-order ranges and depths (every statement on its shard), not part of the API';
REVOKE ALL ON FUNCTION hrag._repair_document(uuid) FROM PUBLIC;
