-- Revision 0002: the retrieval functions (search_leaves, parent_child,
-- auto_merge_hits, auto_merge, node_text), so each retrieval is one round trip
-- for Python and psql alike.  Placeholder: {{embedding_dim}}.
-- Current definitions: hrag_pg/sql/search.sql, parent_child.sql, merge.sql, text.sql;
-- reasoning: docs/decisions.md, "Inclusive merge threshold, merged score = best absorbed hit".

-- ---------------------------------------------------------------------------
-- Argument checks shared by the search functions.  Errors name the argument.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._check_query(query vector, filter jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF query IS NULL THEN
        RAISE EXCEPTION 'hrag: argument "query" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query) <> {{embedding_dim}} THEN
        RAISE EXCEPTION 'hrag: argument "query" has % dimensions, but this installation stores % (hrag.config.embedding_dim)',
            vector_dims(query), {{embedding_dim}}
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

CREATE FUNCTION hrag._check_count(value integer, name text, max_value integer DEFAULT 1000)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF value IS NULL OR value <= 0 OR value > max_value THEN
        RAISE EXCEPTION 'hrag: argument "%" must be between 1 and %, got %', name, max_value, coalesce(value::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;

CREATE FUNCTION hrag._check_hits(node_ids uuid[], scores real[])
RETURNS boolean
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

CREATE FUNCTION hrag._check_threshold(merge_threshold real)
RETURNS boolean
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

-- ---------------------------------------------------------------------------
-- hrag.node_text: a node's full text (own text + descendants, document order).
-- One range scan of the (document_id, seq) index; NULL for an unknown id.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.node_text(node_id uuid)
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

-- ---------------------------------------------------------------------------
-- hrag.search_leaves: the ANN step.
--
-- HNSW (cosine) with pgvector 0.8's iterative index scan, so the collection
-- and metadata filters are applied *inside* the scan: a selective filter
-- still returns k rows (up to hnsw.max_scan_tuples visited).  The metadata
-- filter is a jsonb containment test against the node's metadata merged
-- over its document's metadata (node keys win), so {"lang": "ja"} set on a
-- document selects all of its nodes.  relaxed_order
-- lets the scan return slightly out of order; the outer ORDER BY restores it.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.search_leaves(
    query      vector,
    k          integer DEFAULT 20,
    collection text    DEFAULT NULL,
    filter     jsonb   DEFAULT NULL
)
RETURNS TABLE (node_id uuid, parent_id uuid, document_id uuid, score real)
LANGUAGE plpgsql STABLE
SET hnsw.iterative_scan = 'relaxed_order'
AS $$
#variable_conflict use_column
DECLARE
    ids     uuid[];
    parents uuid[];
    docs    uuid[];
    sims    real[];
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    IF current_setting('hnsw.ef_search')::integer < k THEN
        PERFORM set_config('hnsw.ef_search', k::text, true);
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

-- ---------------------------------------------------------------------------
-- hrag.parent_child: small-to-big.
--
-- Walk children (embedded nodes that have a parent) in similarity order.
-- The first top_k_children are "matched"; parents are de-duplicated in
-- first-seen order and at most max_parents are kept.  If the first
-- top_k_children collapse into fewer than max_parents parents, the walk
-- goes on (looking only for new parents) until max_parents parents are found,
-- a child scores below min_score, or the index is exhausted, because users
-- expect k to count parents.  Each parent comes back with its full text, its
-- best child's score and the children that matched it.  A child whose
-- parent is a "group" (see hrag_pg/ingest/groups.py) expands to the group's
-- parent: groups exist for auto-merging, the context is the section.
--
-- The walk reads the index in LIMITed batches (an HNSW scan needs a LIMIT);
-- the rare walk that needs more children repeats the scan with a 4x larger
-- LIMIT and skips the children it has already seen.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.parent_child(
    query          vector,
    top_k_children integer DEFAULT 20,
    max_parents    integer DEFAULT 4,
    collection     text    DEFAULT NULL,
    filter         jsonb   DEFAULT NULL,
    min_score      real    DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer)
LANGUAGE plpgsql STABLE
SET hnsw.iterative_scan = 'relaxed_order'
AS $$
#variable_conflict use_column
DECLARE
    child        record;
    batch        integer := greatest(top_k_children, 8 * max_parents);
    returned     integer;
    considered   integer := 0;
    done         boolean := false;
    seen         uuid[]  := '{}';
    parent_ids   uuid[]  := '{}';
    parent_best  real[]  := '{}';
    child_ids    uuid[]  := '{}';
    child_parent uuid[]  := '{}';
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');

    <<scan>>
    LOOP
        IF current_setting('hnsw.ef_search')::integer < least(batch, 1000) THEN
            PERFORM set_config('hnsw.ef_search', least(batch, 1000)::text, true);
        END IF;
        returned := 0;
        FOR child IN
            -- A "group" (a run of paragraphs under a wide section) is no context of
            -- its own: the child expands to the group's parent, the real section.
            SELECT c.id,
                   CASE WHEN p.kind = 'group' THEN p.parent_id ELSE c.parent_id END AS parent_id,
                   (1 - c.distance)::real AS score
              FROM (SELECT n.id, n.parent_id, n.embedding <=> query AS distance
                      FROM hrag.nodes n
                     WHERE n.embedding IS NOT NULL
                       AND n.parent_id IS NOT NULL
                       AND (parent_child.collection IS NULL OR n.collection = parent_child.collection)
                       AND (parent_child.filter IS NULL
                            OR n.metadata @> parent_child.filter
                            OR EXISTS (SELECT 1 FROM hrag.documents d
                                        WHERE d.id = n.document_id
                                          AND (d.metadata || n.metadata) @> parent_child.filter))
                     ORDER BY n.embedding <=> query
                     LIMIT batch) AS c
              JOIN hrag.nodes p ON p.id = c.parent_id
             ORDER BY c.distance, c.id
        LOOP
            returned := returned + 1;
            CONTINUE WHEN child.id = ANY (seen);
            seen := seen || child.id;
            IF (min_score IS NOT NULL AND child.score < min_score)
               OR (considered >= top_k_children AND cardinality(parent_ids) >= max_parents) THEN
                done := true;
                EXIT;
            END IF;
            considered := considered + 1;

            IF child.parent_id = ANY (parent_ids) THEN
                -- A known parent: record the match only within the top k.
                IF considered <= top_k_children THEN
                    child_ids    := child_ids || child.id;
                    child_parent := child_parent || child.parent_id;
                END IF;
            ELSIF cardinality(parent_ids) < max_parents THEN
                parent_ids   := parent_ids || child.parent_id;
                parent_best  := parent_best || child.score;
                child_ids    := child_ids || child.id;
                child_parent := child_parent || child.parent_id;
            END IF;
        END LOOP;
        -- Stop when satisfied, when the index has no more rows, or at a sane bound.
        EXIT scan WHEN done
                    OR (considered >= top_k_children AND cardinality(parent_ids) >= max_parents)
                    OR returned < batch
                    OR batch >= 100000;
        batch := batch * 4;
    END LOOP;

    RETURN QUERY
    SELECT p.id,
           p.document_id,
           p.title,
           p.heading_path,
           hrag.node_text(p.id),
           picked.best,
           ARRAY(SELECT m.child_id
                   FROM unnest(child_ids, child_parent) WITH ORDINALITY AS m(child_id, parent_id, ord)
                  WHERE m.parent_id = picked.parent_id
                  ORDER BY m.ord),
           picked.ord::integer
      FROM unnest(parent_ids, parent_best) WITH ORDINALITY AS picked(parent_id, best, ord)
      JOIN hrag.nodes p ON p.id = picked.parent_id
     ORDER BY picked.ord;
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.parent_child_hits: small-to-big for hits that came from elsewhere
-- (a reranker's order, a keyword search).  The array order is the rank
-- order: parents are de-duplicated in first-seen order, at most max_parents,
-- each with its full text, its best hit score and its matched hits in order.
-- As in parent_child, only the first top_k_children hits (all when NULL)
-- count as matches; later hits only contribute parents not seen yet.
-- Unknown ids and hits without a parent are ignored.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.parent_child_hits(
    node_ids       uuid[],
    scores         real[],
    max_parents    integer DEFAULT 4,
    top_k_children integer DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    PERFORM hrag._check_count(max_parents, 'max_parents');
    IF top_k_children IS NOT NULL THEN
        PERFORM hrag._check_count(top_k_children, 'top_k_children');
    END IF;

    RETURN QUERY
    WITH hit AS (
        -- as in parent_child, a child of a "group" expands to the group's parent
        SELECT h.id, h.score, h.ord,
               CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END AS parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN hrag.nodes n ON n.id = h.id
          JOIN hrag.nodes p ON p.id = n.parent_id
    ),
    first_hit AS (
        SELECT hit.*, min(hit.ord) OVER (PARTITION BY hit.parent_id) AS first_seen
          FROM hit
    ),
    picked AS (
        SELECT f.parent_id,
               min(f.first_seen) AS first_seen,
               max(f.score) FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS best,
               array_agg(f.id ORDER BY f.ord)
                   FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS matched
          FROM first_hit f
         GROUP BY f.parent_id
         ORDER BY first_seen
         LIMIT max_parents
    )
    SELECT p.id, p.document_id, p.title, p.heading_path, hrag.node_text(p.id),
           picked.best, picked.matched,
           (row_number() OVER (ORDER BY picked.first_seen))::integer
      FROM picked
      JOIN hrag.nodes p ON p.id = picked.parent_id
     ORDER BY picked.first_seen;
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.auto_merge_hits: the auto-merge, for hits from anywhere (an ANN
-- search, a reranker, a keyword search).
--
-- A node is *covered* if it is a hit, or if it is *merged*: the share of its
-- children that are covered is >= merge_threshold (inclusive: 2 of 4 merges
-- at 0.5).  Coverage is decided bottom-up, level by level, so a merged node
-- counts as one covered child of its own parent and merging continues to any
-- depth.  The result is every covered node with no covered ancestor, so it
-- never holds a node together with one of its ancestors.
--
-- score     = the best score among the hits the result node absorbed (itself
--             included): a merge never ranks below its best evidence.
-- merged_from = the hits strictly inside the result node's subtree.
-- hit_ratio = covered children / child_count for merged nodes, else NULL.
-- Unknown ids are ignored (the node may have been deleted since the search);
-- a duplicate id keeps its best score.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.auto_merge_hits(
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

-- ---------------------------------------------------------------------------
-- hrag.auto_merge: search_leaves + auto_merge_hits, one round trip.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.auto_merge(
    query           vector,
    top_k           integer DEFAULT 12,
    merge_threshold real    DEFAULT 0.5,
    collection      text    DEFAULT NULL,
    filter          jsonb   DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer)
LANGUAGE sql STABLE
AS $$
    WITH hits AS (
        SELECT s.node_id, s.score
          FROM hrag.search_leaves(query, top_k, collection, filter) AS s
    )
    SELECT m.*
      FROM hrag.auto_merge_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                                merge_threshold) AS m
     ORDER BY m.rank
$$;
