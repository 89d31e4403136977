-- Undo revision 0007: back to revision 0006's functions, no statistics, no budget mode.
-- Current definitions: hrag_pg/sql/search.sql, lexical.sql, budget.sql.
DROP FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real);
DROP FUNCTION hrag.retrieve_hits(uuid[], real[], integer);
DROP FUNCTION hrag._setting(text, double precision);
DROP FUNCTION hrag.sample_hits(integer, text, real);
DROP FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real);
DROP FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer);
DROP FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb);
DROP FUNCTION hrag.auto_merge_hits(uuid[], real[], real);

CREATE OR REPLACE FUNCTION hrag.search_hybrid(
    query              vector,
    query_text         text,
    k                  integer DEFAULT 20,
    collection         text    DEFAULT NULL,
    filter             jsonb   DEFAULT NULL,
    lexical_weight     real    DEFAULT 0.3,
    candidates         integer DEFAULT NULL,
    min_relative_score real    DEFAULT NULL
)
RETURNS TABLE (node_id uuid, parent_id uuid, document_id uuid, score real,
               vector_score real, lexical_score real)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    terms text[];
BEGIN
    PERFORM hrag._check_count(k, 'k');
    IF candidates IS NOT NULL THEN
        PERFORM hrag._check_count(candidates, 'candidates');
    END IF;
    -- The ANN step dominates the cost (100 candidates cost 7x what 12 do), so
    -- by default rescore 3k, at least 30: enough for the IDF weights to mean something.
    candidates := greatest(coalesce(candidates, 3 * k), k, 30);
    IF lexical_weight IS NULL OR lexical_weight < 0 OR lexical_weight > 1 OR lexical_weight = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "lexical_weight" must be in [0, 1], got %', coalesce(lexical_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF min_relative_score IS NOT NULL AND (min_relative_score <= 0 OR min_relative_score > 1) THEN
        RAISE EXCEPTION 'hrag: argument "min_relative_score" must be in (0, 1], got %', min_relative_score
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    terms := hrag.lexical_terms(query_text);

    RETURN QUERY
    WITH candidate AS (
        SELECT s.node_id, s.parent_id, s.document_id, s.score AS vector_score,
               coalesce(n.lexical_terms, '{}') AS doc_terms
          FROM hrag.search_leaves(query, candidates, collection, filter) AS s
          JOIN hrag.nodes n ON n.id = s.node_id
    ),
    -- smoothed inverse document frequency of each question term among the candidates
    term_weight AS (
        SELECT t.term,
               ln(1.0 + (count(c.node_id) + 1.0)
                        / (count(c.node_id) FILTER (WHERE t.term = ANY (c.doc_terms)) + 1.0)) AS weight
          FROM unnest(terms) AS t(term)
          CROSS JOIN candidate c
         GROUP BY t.term
    ),
    scored AS (
        SELECT c.node_id, c.parent_id, c.document_id, c.vector_score,
               coalesce((SELECT sum(w.weight) FROM term_weight w WHERE w.term = ANY (c.doc_terms))
                        / nullif((SELECT sum(w.weight) FROM term_weight w), 0), 0)::real AS lexical_score
          FROM candidate c
    ),
    ranked AS (
        SELECT s.*,
               ((1 - lexical_weight) * s.vector_score + lexical_weight * s.lexical_score)::real AS combined
          FROM scored s
         ORDER BY combined DESC, s.node_id
         LIMIT k
    )
    SELECT r.node_id, r.parent_id, r.document_id, r.combined, r.vector_score, r.lexical_score
      FROM ranked r
     WHERE min_relative_score IS NULL
        OR r.combined >= min_relative_score * (SELECT max(b.combined) FROM ranked b)
     ORDER BY r.combined DESC, r.node_id;
END
$$;

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

CREATE OR REPLACE FUNCTION hrag.grant_reader(role_name name)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA hrag TO %I', role_name);
    EXECUTE format('GRANT SELECT ON hrag.documents, hrag.nodes, hrag.config TO %I', role_name);
    -- The Python API checks the schema revision before its first call.
    IF to_regclass('hrag.alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON hrag.alembic_version TO %I', role_name);
    END IF;
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hrag TO %I', role_name);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION hrag.repair_integrity(), hrag.grant_reader(name), '
                   'hrag.create_tenant_role(name, text[], boolean) FROM %I', role_name);
END
$$;

CREATE OR REPLACE FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean DEFAULT false)
RETURNS void
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
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON hrag.documents, hrag.nodes TO %I', role_name);
    END IF;
END
$$;

ALTER FUNCTION hrag.search_leaves(vector, integer, text, jsonb) ROWS 1000;
ALTER FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) ROWS 1000;
DROP FUNCTION hrag._term_weights(text[], text);
DROP FUNCTION hrag.refresh_document_terms(uuid);
DROP TABLE hrag.document_terms;
DROP INDEX hrag.nodes_lexical_terms_idx;
ALTER TABLE hrag.documents DROP COLUMN search_targets;
ALTER TABLE hrag.documents DROP COLUMN total_tokens;
ALTER TABLE hrag.nodes DROP COLUMN subtree_tokens;

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
