-- Revision 0006: exact text (nodes.separator, so text comes back as written),
-- check/repair of a missing HNSW index, and a COMMENT on every function.
-- Current definitions: hrag_pg/sql/text.sql, vector_index.sql, integrity.sql;
-- reasoning: docs/decisions.md, "Each node stores the text before it (`separator`); headings keep their markers".

ALTER TABLE hrag.nodes ADD COLUMN separator text NOT NULL DEFAULT E'\n\n';
COMMENT ON COLUMN hrag.nodes.separator IS
    'Text between the previous non-empty node (in seq order) and this node''s content in the original document';
COMMENT ON COLUMN hrag.nodes.content IS
    'The node''s own text only; full text = contents of seq..subtree_end joined by their separators (hrag.node_text)';

-- ---------------------------------------------------------------------------
-- hrag._subtree_text: the one place where a full text is assembled.
-- One range scan of the (document_id, seq) index.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._subtree_text(document_id uuid, first_seq integer, last_seq integer)
RETURNS text
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

CREATE OR REPLACE FUNCTION hrag.node_text(node_id uuid)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT hrag._subtree_text(n.document_id, n.seq, n.subtree_end)
      FROM hrag.nodes n
     WHERE n.id = node_text.node_id
$$;

-- auto_merge_hits: unchanged but for the full text, now hrag._subtree_text.
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
           hrag._subtree_text(n.document_id, n.seq, n.subtree_end),
           r.score, r.merged_from,
           (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top),
           (row_number() OVER (ORDER BY r.score DESC, n.depth, n.id))::integer
      FROM result r
      JOIN hrag.nodes n ON n.id = r.top
     -- The argument checks: a constant qual of the top query, evaluated once
     -- before any row (a CTE the plan never reads from would never run them).
     WHERE hrag._check_hits(node_ids, scores) AND hrag._check_threshold(merge_threshold)
     ORDER BY r.score DESC, n.depth, n.id
$$;

-- ---------------------------------------------------------------------------
-- The vector index: check and repair.
-- ---------------------------------------------------------------------------
-- The one definition of the ANN index (also used by the bulk path to rebuild it).
CREATE FUNCTION hrag._create_vector_index()
RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    CREATE INDEX nodes_embedding_hnsw_idx ON hrag.nodes
        USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
END
$$;

-- 'valid' (a usable HNSW index on nodes.embedding), 'invalid' (only a failed
-- or unfinished build), or 'missing'.
CREATE FUNCTION hrag._vector_index_state()
RETURNS text
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

CREATE OR REPLACE FUNCTION hrag.check_integrity()
RETURNS TABLE (problem text, document_id uuid, node_id uuid, detail text)
LANGUAGE sql STABLE
AS $$
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

-- repair_integrity: as before, plus rebuilding a missing or invalid vector index.
CREATE OR REPLACE FUNCTION hrag.repair_integrity()
RETURNS TABLE (problem text, fixed bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n_counts bigint;
    n_order  bigint;
    n_depth  bigint;
    n_index  bigint := 0;
BEGIN
    IF hrag._vector_index_state() <> 'valid' THEN
        DROP INDEX IF EXISTS hrag.nodes_embedding_hnsw_idx;
        -- an invalid index under another name: drop every non-valid HNSW index on nodes
        PERFORM hrag._drop_invalid_vector_indexes();
        PERFORM hrag._create_vector_index();
        n_index := 1;
    END IF;

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

    RETURN QUERY VALUES ('vector_index', n_index), ('wrong_child_count', n_counts),
                        ('broken_ordering', n_order), ('wrong_depth', n_depth);
END
$$;

CREATE FUNCTION hrag._drop_invalid_vector_indexes()
RETURNS void
LANGUAGE plpgsql VOLATILE
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

REVOKE ALL ON FUNCTION hrag._create_vector_index() FROM PUBLIC;
REVOKE ALL ON FUNCTION hrag._drop_invalid_vector_indexes() FROM PUBLIC;

-- ---------------------------------------------------------------------------
-- What `\df+ hrag.*` shows.
-- ---------------------------------------------------------------------------
COMMENT ON FUNCTION hrag.node_text(uuid) IS
    'Full text of any node: its own text and its descendants'', in document order (NULL for an unknown id)';
COMMENT ON FUNCTION hrag.search_leaves(vector, integer, text, jsonb) IS
    'The ANN step: the k embedded nodes nearest the query (cosine), collection and metadata filters inside the HNSW scan';
COMMENT ON FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) IS
    'Small-to-big: match the top children, return their distinct parents'' full text (at most max_parents)';
COMMENT ON FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) IS
    'Small-to-big for hits from elsewhere (a reranker, a keyword search): array order is rank order';
COMMENT ON FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) IS
    'Auto-merging: hit leaves, replace them by their parent where hit children / children >= merge_threshold, upward';
COMMENT ON FUNCTION hrag.auto_merge_hits(uuid[], real[], real) IS
    'The auto-merge for hits from elsewhere (a reranker, a keyword search), with why each node was returned';
COMMENT ON FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) IS
    'The ANN step rescored by lexical overlap of query_text (English stems, CJK bigrams)';
COMMENT ON FUNCTION hrag.lexical_terms(text) IS
    'The distinct search terms of a text: English stems without stop words, CJK character bigrams';
COMMENT ON FUNCTION hrag.node_lexical_terms(text[], text, jsonb) IS
    'The search terms stored for a node (heading path and text; the question of a QA node)';
COMMENT ON FUNCTION hrag.check_integrity() IS
    'One row per problem: vector index, roots, child counts, pre-order ranges, depths, leaves without embedding';
COMMENT ON FUNCTION hrag.repair_integrity() IS
    'Recompute child counts, ranges and depths and rebuild a missing vector index; returns what was fixed';
COMMENT ON FUNCTION hrag.visible_collections() IS
    'The collections the current role is bound to, or NULL if it is not a tenant (sees everything)';
COMMENT ON FUNCTION hrag.grant_reader(name) IS
    'Let a role retrieve (read tables, call functions) but not write';
COMMENT ON FUNCTION hrag.create_tenant_role(name, text[], boolean) IS
    'Create or update a role that sees only the given collections (row-level security); can_write lets it ingest';
COMMENT ON FUNCTION hrag._check_query(vector, jsonb) IS 'internal: argument check, not part of the API';
COMMENT ON FUNCTION hrag._check_count(integer, text, integer) IS 'internal: argument check, not part of the API';
COMMENT ON FUNCTION hrag._check_hits(uuid[], real[]) IS 'internal: argument check, not part of the API';
COMMENT ON FUNCTION hrag._check_threshold(real) IS 'internal: argument check, not part of the API';
COMMENT ON FUNCTION hrag._subtree_text(uuid, integer, integer) IS 'internal: full text of a seq range, not part of the API';
COMMENT ON FUNCTION hrag._create_vector_index() IS 'internal: the HNSW index definition, not part of the API';
COMMENT ON FUNCTION hrag._vector_index_state() IS 'internal: valid, invalid or missing, not part of the API';
COMMENT ON FUNCTION hrag._drop_invalid_vector_indexes() IS 'internal: used by repair_integrity, not part of the API';
