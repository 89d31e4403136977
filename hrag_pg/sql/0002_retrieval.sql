-- hrag-pg retrieval functions, revision 0002.
--
-- The single source of truth for retrieval: Python and psql users call these
-- functions, and each retrieval is one round trip.  Scores are cosine
-- similarity (1 - cosine distance), higher is better.
--
-- Placeholders filled in by the migration: {{embedding_dim}}.

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
RETURNS void
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
-- Does a node pass the collection and metadata filters?  The metadata filter
-- is a jsonb containment test against the node's metadata merged over its
-- document's metadata (node keys win), so {"lang": "ja"} set on a document
-- selects all of its nodes.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._metadata_matches(node_document uuid, node_metadata jsonb, filter jsonb)
RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT filter IS NULL
        OR node_metadata @> filter
        OR EXISTS (SELECT 1
                     FROM hrag.documents d
                    WHERE d.id = node_document
                      AND (d.metadata || node_metadata) @> filter)
$$;

-- ---------------------------------------------------------------------------
-- hrag.search_leaves: the ANN step.
--
-- HNSW (cosine) with pgvector 0.8's iterative index scan, so the collection
-- and metadata filters are applied *inside* the scan: a selective filter
-- still returns k rows (up to hnsw.max_scan_tuples visited).  relaxed_order
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
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    IF current_setting('hnsw.ef_search')::integer < k THEN
        PERFORM set_config('hnsw.ef_search', k::text, true);
    END IF;

    RETURN QUERY
    SELECT hit.id, hit.parent_id, hit.document_id, (1 - hit.distance)::real
      FROM (SELECT n.id, n.parent_id, n.document_id, n.embedding <=> query AS distance
              FROM hrag.nodes n
             WHERE n.embedding IS NOT NULL
               AND (search_leaves.collection IS NULL OR n.collection = search_leaves.collection)
               AND hrag._metadata_matches(n.document_id, n.metadata, search_leaves.filter)
             ORDER BY n.embedding <=> query
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
-- best child's score and the children that matched it.
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
SET hnsw.iterative_scan = 'strict_order'
AS $$
#variable_conflict use_column
DECLARE
    child        record;
    considered   integer := 0;
    parent_ids   uuid[]  := '{}';
    parent_best  real[]  := '{}';
    child_ids    uuid[]  := '{}';
    child_parent uuid[]  := '{}';
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');
    IF current_setting('hnsw.ef_search')::integer < top_k_children THEN
        PERFORM set_config('hnsw.ef_search', top_k_children::text, true);
    END IF;

    -- A FOR loop reads the ordered index scan through a cursor, so the scan
    -- stops as soon as we exit.
    FOR child IN
        SELECT n.id, n.parent_id, (1 - (n.embedding <=> query))::real AS score
          FROM hrag.nodes n
         WHERE n.embedding IS NOT NULL
           AND n.parent_id IS NOT NULL
           AND (parent_child.collection IS NULL OR n.collection = parent_child.collection)
           AND hrag._metadata_matches(n.document_id, n.metadata, parent_child.filter)
         ORDER BY n.embedding <=> query
    LOOP
        EXIT WHEN min_score IS NOT NULL AND child.score < min_score;
        EXIT WHEN considered >= top_k_children AND cardinality(parent_ids) >= max_parents;
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
        SELECT h.id, h.score, h.ord, n.parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN hrag.nodes n ON n.id = h.id
         WHERE n.parent_id IS NOT NULL
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
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    cand_id        uuid[];
    cand_parent    uuid[];
    cand_depth     integer[];
    cand_children  integer[];
    covered        uuid[];
    merged_ids     uuid[] := '{}';
    merged_ratios  real[] := '{}';
    new_ids        uuid[];
    new_ratios     real[];
    level          integer;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    IF merge_threshold IS NULL OR merge_threshold <= 0 OR merge_threshold > 1 OR merge_threshold = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "merge_threshold" must be in (0, 1], got %', coalesce(merge_threshold::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The hits and all their ancestors: the only nodes the merge can touch.
    WITH RECURSIVE up AS (
        SELECT n.id, n.parent_id, n.depth, n.child_count
          FROM hrag.nodes n
         WHERE n.id = ANY (node_ids)
        UNION
        SELECT p.id, p.parent_id, p.depth, p.child_count
          FROM up
          JOIN hrag.nodes p ON p.id = up.parent_id
    )
    SELECT array_agg(up.id), array_agg(up.parent_id), array_agg(up.depth), array_agg(up.child_count)
      INTO cand_id, cand_parent, cand_depth, cand_children
      FROM up;

    IF cand_id IS NULL THEN
        RETURN;
    END IF;
    covered := ARRAY(SELECT DISTINCT h FROM unnest(node_ids) AS h WHERE h = ANY (cand_id));

    -- Bottom-up: decide the parents of each level once their children are final.
    FOR level IN REVERSE (SELECT max(d) FROM unnest(cand_depth) AS d) .. 1 LOOP
        SELECT array_agg(s.parent_id), array_agg(s.ratio)
          INTO new_ids, new_ratios
          FROM (SELECT c.parent_id,
                       (count(*)::real / max(p.child_count)::real) AS ratio
                  FROM unnest(cand_id, cand_parent, cand_depth) AS c(id, parent_id, depth)
                  JOIN unnest(cand_id, cand_children) AS p(id, child_count) ON p.id = c.parent_id
                 WHERE c.depth = level
                   AND c.id = ANY (covered)
                   AND p.child_count > 0
                 GROUP BY c.parent_id) AS s
         WHERE s.ratio >= merge_threshold;
        IF new_ids IS NOT NULL THEN
            covered       := covered || new_ids;
            merged_ids    := merged_ids || new_ids;
            merged_ratios := merged_ratios || new_ratios;
        END IF;
    END LOOP;

    RETURN QUERY
    WITH RECURSIVE
    cand AS (
        SELECT * FROM unnest(cand_id, cand_parent) AS c(id, parent_id)
    ),
    hit AS (
        SELECT h.id, max(h.score) AS score
          FROM unnest(node_ids, scores) AS h(id, score)
         WHERE h.id = ANY (cand_id)
         GROUP BY h.id
    ),
    -- every (covered node, ancestor) pair within the candidates
    lineage AS (
        SELECT c.id AS node, c.parent_id AS ancestor
          FROM cand c
         WHERE c.id = ANY (covered) AND c.parent_id IS NOT NULL
        UNION ALL
        SELECT l.node, c.parent_id
          FROM lineage l
          JOIN cand c ON c.id = l.ancestor
         WHERE c.parent_id IS NOT NULL
    ),
    top AS (
        SELECT c.id
          FROM cand c
         WHERE c.id = ANY (covered)
           AND NOT EXISTS (SELECT 1 FROM lineage l
                            WHERE l.node = c.id AND l.ancestor = ANY (covered))
    ),
    result AS (
        SELECT t.id,
               (SELECT max(h.score) FROM hit h
                 WHERE h.id = t.id
                    OR EXISTS (SELECT 1 FROM lineage l WHERE l.node = h.id AND l.ancestor = t.id)) AS score,
               ARRAY(SELECT h.id FROM hit h
                      WHERE EXISTS (SELECT 1 FROM lineage l WHERE l.node = h.id AND l.ancestor = t.id)
                      ORDER BY h.score DESC, h.id) AS merged_from,
               (SELECT r.ratio FROM unnest(merged_ids, merged_ratios) AS r(id, ratio)
                 WHERE r.id = t.id) AS hit_ratio
          FROM top t
    )
    SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, hrag.node_text(n.id),
           r.score, r.merged_from, r.hit_ratio,
           (row_number() OVER (ORDER BY r.score DESC, n.depth, n.id))::integer
      FROM result r
      JOIN hrag.nodes n ON n.id = r.id
     ORDER BY r.score DESC, n.depth, n.id;
END
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
