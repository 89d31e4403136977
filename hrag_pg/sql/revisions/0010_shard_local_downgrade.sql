-- Undo revision 0010: back to the retrieval functions of revisions 0006/0007
-- and hrag.distribute() of 0009 (verbatim), without the per-document steps.
-- A distributed installation cannot go back this way (see 0009).
-- Current definitions: hrag_pg/sql/text.sql, merge.sql, parent_child.sql, budget.sql.

CREATE OR REPLACE FUNCTION hrag._term_weights(terms text[], collection text)
RETURNS TABLE (term text, df bigint, idf real)
LANGUAGE sql STABLE
AS $$
    WITH n AS (
        SELECT greatest(coalesce(sum(d.search_targets), 0), 1) AS leaves
          FROM hrag.documents d
         WHERE _term_weights.collection IS NULL OR d.collection = _term_weights.collection
    ),
    freq AS (
        SELECT q.term,
               (SELECT coalesce(sum(t.leaves), 0)
                  FROM hrag.document_terms t
                 WHERE t.term = q.term
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)) AS df
          FROM unnest(terms) AS q(term)
    )
    SELECT f.term, f.df, ln(1.0 + (n.leaves - f.df + 0.5) / (f.df + 0.5))::real
      FROM freq f, n
     WHERE f.df > 0
     ORDER BY f.df, f.term
$$;

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
    terms      text[];
    idfs       real[];
    total      real;
    rare       text[] := '{}';
    rare_df    bigint := 0;
    weight     real;
    term_row   record;
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    IF candidates IS NOT NULL THEN
        PERFORM hrag._check_count(candidates, 'candidates');
    END IF;
    candidates := greatest(coalesce(candidates, 3 * k), k, 30);
    IF lexical_weight IS NULL OR lexical_weight < 0 OR lexical_weight > 1 OR lexical_weight = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "lexical_weight" must be in [0, 1], got %', coalesce(lexical_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF min_relative_score IS NOT NULL AND (min_relative_score <= 0 OR min_relative_score > 1) THEN
        RAISE EXCEPTION 'hrag: argument "min_relative_score" must be in (0, 1], got %', min_relative_score
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    terms := '{}';
    idfs := '{}';
    IF lexical_weight > 0 THEN
        FOR term_row IN SELECT * FROM hrag._term_weights(hrag.lexical_terms(query_text), collection) LOOP
            terms := terms || term_row.term;
            idfs := idfs || term_row.idf;
            IF cardinality(rare) = 0 OR rare_df + term_row.df <= 300 THEN
                rare := rare || term_row.term;
                rare_df := rare_df + term_row.df;
            END IF;
        END LOOP;
    END IF;
    total := coalesce((SELECT sum(x) FROM unnest(idfs) AS x), 0);
    weight := CASE WHEN total > 0 THEN lexical_weight ELSE 0 END;

    RETURN QUERY
    WITH vector_hit AS (
        SELECT s.node_id, s.parent_id, s.document_id, s.score AS vector_score
          FROM hrag.search_leaves(query, candidates, collection, filter) AS s
    ),
    lexical_hit AS (
        SELECT n.id AS node_id, n.parent_id, n.document_id, n.lexical_terms
          FROM hrag.nodes n
         WHERE cardinality(rare) > 0
           AND n.lexical_terms && rare
           AND n.lexical_terms IS NOT NULL
           AND n.embedding IS NOT NULL
           AND (search_hybrid.collection IS NULL OR n.collection = search_hybrid.collection)
           AND (search_hybrid.filter IS NULL
                OR n.metadata @> search_hybrid.filter
                OR EXISTS (SELECT 1 FROM hrag.documents d
                            WHERE d.id = n.document_id
                              AND (d.metadata || n.metadata) @> search_hybrid.filter))
         LIMIT 1000
    ),
    lexical_best AS (
        SELECT l.node_id, l.parent_id, l.document_id,
               (SELECT sum(w.idf) FROM unnest(terms, idfs) AS w(term, idf) WHERE w.term = ANY (l.lexical_terms))
                   / total AS lexical_score
          FROM lexical_hit l
         ORDER BY 4 DESC, l.node_id
         LIMIT candidates
    ),
    pool AS (
        SELECT v.node_id, v.parent_id, v.document_id, v.vector_score FROM vector_hit v
        UNION ALL
        SELECT b.node_id, b.parent_id, b.document_id, (1 - (n.embedding <=> query))::real
          FROM lexical_best b
          JOIN hrag.nodes n ON n.id = b.node_id
         WHERE NOT EXISTS (SELECT 1 FROM vector_hit v WHERE v.node_id = b.node_id)
    ),
    scored AS (
        SELECT p.node_id, p.parent_id, p.document_id, p.vector_score,
               CASE WHEN total > 0
                    THEN coalesce((SELECT sum(w.idf) FROM unnest(terms, idfs) AS w(term, idf)
                                    WHERE w.term = ANY (n.lexical_terms)), 0) / total
                    ELSE 0 END::real AS lexical_score
          FROM pool p
          JOIN hrag.nodes n ON n.id = p.node_id
    ),
    ranked AS (
        SELECT s.*, ((1 - weight) * s.vector_score + weight * s.lexical_score)::real AS combined
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

CREATE OR REPLACE FUNCTION hrag.parent_child_hits(
    node_ids       uuid[],
    scores         real[],
    max_parents    integer DEFAULT 4,
    top_k_children integer DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    parent    record;
    kept_ids  uuid[] := '{}';
    kept_doc  uuid[] := '{}';
    kept_seq  integer[] := '{}';
    kept_end  integer[] := '{}';
    clashes  boolean;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    PERFORM hrag._check_count(max_parents, 'max_parents');
    IF top_k_children IS NOT NULL THEN
        PERFORM hrag._check_count(top_k_children, 'top_k_children');
    END IF;

    FOR parent IN
        WITH hit AS (
            SELECT h.id, h.score, h.ord,
                   CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END AS parent_id
              FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
              JOIN hrag.nodes n ON n.id = h.id
              JOIN hrag.nodes p ON p.id = n.parent_id
        )
        SELECT h.parent_id, min(h.ord) AS first_seen, n.document_id, n.seq, n.subtree_end
          FROM hit h
          JOIN hrag.nodes n ON n.id = h.parent_id
         GROUP BY h.parent_id, n.document_id, n.seq, n.subtree_end
         ORDER BY first_seen
    LOOP
        clashes := false;
        FOR i IN 1 .. cardinality(kept_ids) LOOP
            IF kept_doc[i] = parent.document_id
               AND (parent.seq BETWEEN kept_seq[i] AND kept_end[i] OR kept_seq[i] BETWEEN parent.seq AND parent.subtree_end) THEN
                clashes := true;
                EXIT;
            END IF;
        END LOOP;
        CONTINUE WHEN clashes;
        kept_ids := kept_ids || parent.parent_id;
        kept_doc := kept_doc || parent.document_id;
        kept_seq := kept_seq || parent.seq;
        kept_end := kept_end || parent.subtree_end;
        EXIT WHEN cardinality(kept_ids) >= max_parents;
    END LOOP;

    RETURN QUERY
    WITH hit AS (
        SELECT h.id, h.score, h.ord,
               CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END AS parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN hrag.nodes n ON n.id = h.id
          JOIN hrag.nodes p ON p.id = n.parent_id
    ),
    first_hit AS (
        SELECT hit.*, min(hit.ord) OVER (PARTITION BY hit.parent_id) AS first_seen
          FROM hit
         WHERE hit.parent_id = ANY (kept_ids)
    ),
    picked AS (
        SELECT f.parent_id,
               min(f.first_seen) AS first_seen,
               max(f.score) FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS best,
               array_agg(f.id ORDER BY f.ord)
                   FILTER (WHERE f.ord <= coalesce(top_k_children, f.ord) OR f.ord = f.first_seen) AS matched
          FROM first_hit f
         GROUP BY f.parent_id
    )
    SELECT p.id, p.document_id, p.title, p.heading_path,
           hrag._subtree_text(p.document_id, p.seq, p.subtree_end),
           picked.best, picked.matched,
           (row_number() OVER (ORDER BY picked.first_seen))::integer,
           p.subtree_tokens
      FROM picked
      JOIN hrag.nodes p ON p.id = picked.parent_id
     ORDER BY picked.first_seen;
END
$$;

CREATE OR REPLACE FUNCTION hrag.parent_child(
    query          vector,
    top_k_children integer DEFAULT 20,
    max_parents    integer DEFAULT 4,
    collection     text    DEFAULT NULL,
    filter         jsonb   DEFAULT NULL,
    min_score      real    DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    ids    uuid[];
    sims   real[];
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO ids, sims
      FROM hrag.search_leaves(query, least(greatest(top_k_children, 10 * max_parents), 1000), collection, filter) AS s
      JOIN hrag.nodes n ON n.id = s.node_id
     WHERE n.parent_id IS NOT NULL
       AND (min_score IS NULL OR s.score >= min_score);
    RETURN QUERY SELECT * FROM hrag.parent_child_hits(ids, sims, max_parents, top_k_children);
END
$$;

CREATE OR REPLACE FUNCTION hrag.auto_merge_hits(
    node_ids        uuid[],
    scores          real[],
    merge_threshold real DEFAULT 0.5
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
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
           (row_number() OVER (ORDER BY r.score DESC, n.depth, n.id))::integer,
           n.subtree_tokens
      FROM result r
      JOIN hrag.nodes n ON n.id = r.top
     -- The argument checks: a constant qual of the top query, evaluated once
     -- before any row (a CTE the plan never reads from would never run them).
     WHERE hrag._check_hits(node_ids, scores) AND hrag._check_threshold(merge_threshold)
     ORDER BY r.score DESC, n.depth, n.id
$$;

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
        SELECT s.node_id, s.score
          FROM hrag.search_leaves(query, top_k, collection, filter) AS s
    )
    SELECT m.*
      FROM hrag.auto_merge_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                                merge_threshold) AS m
     ORDER BY m.rank
$$;

CREATE OR REPLACE FUNCTION hrag.retrieve_hits(
    node_ids   uuid[],
    scores     real[],
    max_tokens integer DEFAULT 2000
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    sharpness     double precision := hrag._setting('hrag.auto_sharpness', 0.1);
    size_exponent double precision := hrag._setting('hrag.auto_size_exponent', 0.5);
    min_lift      double precision := hrag._setting('hrag.auto_min_lift', 2.0);
    floor_share   double precision := hrag._setting('hrag.auto_floor', 0);
    scope_tokens  double precision;
    c             record;
    sel_ids       uuid[] := '{}';
    sel_doc       uuid[] := '{}';
    sel_seq       integer[] := '{}';
    sel_end       integer[] := '{}';
    sel_tok       integer[] := '{}';
    sel_why       text[] := '{}';
    alive         boolean[] := '{}';
    inside        boolean;
    below_tokens  integer;
    below_any     boolean;
    used          integer := 0;
    first_priority double precision;
    over_budget   boolean := false;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    IF max_tokens IS NULL OR max_tokens < 1 OR max_tokens > 100000 THEN
        RAISE EXCEPTION 'hrag: argument "max_tokens" must be between 1 and 100000, got %',
            coalesce(max_tokens::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The size of what was searched: the stored tokens of the hits' collections.
    SELECT greatest(coalesce(sum(d.total_tokens), 0), 1) INTO scope_tokens
      FROM hrag.documents d
     WHERE d.collection IN (SELECT n.collection FROM hrag.nodes n WHERE n.id = ANY (node_ids));

    FOR c IN
        WITH RECURSIVE
        hit AS (
            SELECT h.id, max(h.score) AS score FROM unnest(node_ids, scores) AS h(id, score) GROUP BY h.id
        ),
        weighted AS (
            SELECT hit.id, hit.score,
                   exp(greatest((hit.score - max(hit.score) OVER ())::double precision / sharpness, -50)) AS weight
              FROM hit
        ),
        chain AS (
            SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.parent_id
              FROM weighted w
              JOIN hrag.nodes n ON n.id = w.id
            UNION ALL
            SELECT c.hit, c.score, c.weight, p.id, p.parent_id
              FROM chain c
              JOIN hrag.nodes p ON p.id = c.parent_id
        ),
        cand AS (
            SELECT c.node, sum(c.weight) AS evidence, max(c.score) AS best, count(*) AS hits
              FROM chain c
             GROUP BY c.node
        )
        SELECT cand.node, cand.evidence, cand.best, cand.hits, n.document_id, n.seq, n.subtree_end,
               n.subtree_tokens, n.child_count, n.depth,
               cand.evidence / power(greatest(n.subtree_tokens, 1), size_exponent) AS priority,
               -- share of the evidence over share of the searched text: 1 = no better than chance
               (cand.evidence / (SELECT sum(w.weight) FROM weighted w))
                   / (greatest(n.subtree_tokens, 1) / scope_tokens) AS lift
          FROM cand
          JOIN hrag.nodes n ON n.id = cand.node
         ORDER BY priority DESC, cand.best DESC, n.depth DESC, n.id
    LOOP
        EXIT WHEN floor_share > 0 AND first_priority IS NOT NULL AND c.priority < floor_share * first_priority;
        CONTINUE WHEN c.lift < min_lift;
        CONTINUE WHEN c.subtree_tokens > max_tokens;
        inside := false;
        below_tokens := 0;
        below_any := false;
        FOR i IN 1 .. cardinality(sel_ids) LOOP
            CONTINUE WHEN NOT alive[i] OR sel_doc[i] <> c.document_id;
            IF c.seq BETWEEN sel_seq[i] AND sel_end[i] THEN
                inside := true;
                EXIT;
            END IF;
            IF sel_seq[i] BETWEEN c.seq AND c.subtree_end THEN
                below_tokens := below_tokens + sel_tok[i];
                below_any := true;
            END IF;
        END LOOP;
        CONTINUE WHEN inside;
        CONTINUE WHEN used - below_tokens + c.subtree_tokens > max_tokens;
        IF below_any THEN
            -- the node replaces the taken nodes inside it
            FOR i IN 1 .. cardinality(sel_ids) LOOP
                IF alive[i] AND sel_doc[i] = c.document_id AND sel_seq[i] BETWEEN c.seq AND c.subtree_end THEN
                    alive[i] := false;
                END IF;
            END LOOP;
        END IF;
        used := used - below_tokens + c.subtree_tokens;
        first_priority := coalesce(first_priority, c.priority);
        sel_ids := sel_ids || c.node;
        sel_doc := sel_doc || c.document_id;
        sel_seq := sel_seq || c.seq;
        sel_end := sel_end || c.subtree_end;
        sel_tok := sel_tok || c.subtree_tokens;
        alive := alive || true;
        sel_why := sel_why || CASE WHEN c.hits = 1 AND c.child_count = 0 THEN 'hit' ELSE 'merged' END;
    END LOOP;

    sel_why := ARRAY(SELECT w FROM unnest(sel_why, alive) WITH ORDINALITY AS x(w, a, i) WHERE a ORDER BY i);
    sel_ids := ARRAY(SELECT v FROM unnest(sel_ids, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);

    IF cardinality(sel_ids) = 0 THEN
        -- No candidate was worth taking (or fitted): the best hit that fits, so a
        -- hit never yields nothing; if none fits, the best hit alone, flagged.
        SELECT ARRAY[n.id], ARRAY[CASE WHEN n.subtree_tokens <= max_tokens THEN 'hit'
                                       ELSE 'over budget: the best hit alone is larger than max_tokens' END],
               n.subtree_tokens > max_tokens
          INTO sel_ids, sel_why, over_budget
          FROM unnest(node_ids, scores) AS h(id, score)
          JOIN hrag.nodes n ON n.id = h.id
         ORDER BY n.subtree_tokens > max_tokens, h.score DESC, n.id
         LIMIT 1;
    END IF;

    RETURN QUERY
    WITH hit AS (
        SELECT n.id, n.document_id, n.seq, max(h.score) AS score
          FROM unnest(node_ids, scores) AS h(id, score)
          JOIN hrag.nodes n ON n.id = h.id
         GROUP BY n.id, n.document_id, n.seq
    ),
    picked AS (
        SELECT n.id, n.document_id, n.seq, n.subtree_end, x.why
          FROM unnest(sel_ids, sel_why) AS x(id, why)
          JOIN hrag.nodes n ON n.id = x.id
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
          JOIN hit ON hit.document_id = p.document_id AND hit.seq BETWEEN p.seq AND p.subtree_end
          LEFT JOIN LATERAL (SELECT a.id FROM hrag.nodes a
                              WHERE a.parent_id = p.id AND a.document_id = p.document_id
                                AND hit.seq BETWEEN a.seq AND a.subtree_end) AS child ON true
         GROUP BY p.id
    )
    SELECT n.id, n.document_id, n.depth, n.title, n.heading_path,
           hrag._subtree_text(n.document_id, n.seq, n.subtree_end),
           a.best::real, a.merged_from,
           CASE WHEN n.child_count > 0 THEN (a.children_hit::real / n.child_count)::real END,
           (row_number() OVER (ORDER BY a.best DESC, n.depth, n.id))::integer,
           n.subtree_tokens,
           CASE WHEN over_budget THEN p.why
                WHEN p.why = 'hit' THEN 'direct hit'
                ELSE format('%s of %s children hit, %s hits inside', a.children_hit, n.child_count, a.hits_inside)
           END
      FROM picked p
      JOIN absorbed a ON a.id = p.id
      JOIN hrag.nodes n ON n.id = p.id
     ORDER BY a.best DESC, n.depth, n.id;
END
$$;

CREATE OR REPLACE FUNCTION hrag.retrieve(
    query          vector,
    query_text     text    DEFAULT NULL,
    max_tokens     integer DEFAULT 2000,
    collection     text    DEFAULT NULL,
    filter         jsonb   DEFAULT NULL,
    top_k          integer DEFAULT 30,
    lexical_weight real    DEFAULT 0.3
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer, reason text)
LANGUAGE sql STABLE
AS $$
    WITH hits AS (
        SELECT s.node_id, s.score
          FROM hrag.search_hybrid(query, query_text, top_k, collection, filter, lexical_weight) AS s
    )
    SELECT r.*
      FROM hrag.retrieve_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                              ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                              max_tokens) AS r
     ORDER BY r.rank
$$;

CREATE OR REPLACE FUNCTION hrag.node_text(node_id uuid)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT hrag._subtree_text(n.document_id, n.seq, n.subtree_end)
      FROM hrag.nodes n
     WHERE n.id = node_text.node_id
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

CREATE OR REPLACE FUNCTION hrag.distribute(shard_count integer DEFAULT NULL)
RETURNS TABLE (table_name text, distribution text, action text)
LANGUAGE plpgsql VOLATILE
AS $$
#variable_conflict use_column
DECLARE
    spec   record;
    method text;
    tbl    text;
    moved  text[] := '{}';
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') THEN
        RAISE EXCEPTION 'hrag: this server has no Citus extension, so there is nothing to distribute over (run hrag.distribute() on a Citus coordinator after CREATE EXTENSION citus)'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF shard_count IS NOT NULL AND (shard_count < 1 OR shard_count > 64000) THEN
        RAISE EXCEPTION 'hrag: argument "shard_count" must be between 1 and 64000, got %', shard_count
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- One connection per worker for the whole call: Citus distributes a
    -- function only in a transaction that has not fanned out in parallel.
    PERFORM set_config('citus.multi_shard_modify_mode', 'sequential', true);

    -- Single-node constructs Citus cannot hold (see the header of this file).
    -- Only while the tables are still local: a distributed table has none.
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.documents'::regclass) THEN
        ALTER TABLE hrag.documents DROP CONSTRAINT IF EXISTS documents_collection_source_key;
        CREATE INDEX IF NOT EXISTS documents_collection_source_idx ON hrag.documents (collection, source);
        ALTER POLICY documents_by_collection ON hrag.documents
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.nodes'::regclass) THEN
        ALTER POLICY nodes_by_collection ON hrag.nodes
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.document_terms'::regclass) THEN
        ALTER POLICY document_terms_by_collection ON hrag.document_terms
            USING (hrag._collection_visible(collection)) WITH CHECK (hrag._collection_visible(collection));
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'hrag.tenant_collections'::regclass) THEN
        ALTER POLICY tenant_collections_own ON hrag.tenant_collections USING (hrag._is_member_of(role_name));
    END IF;

    FOR spec IN
        SELECT * FROM (VALUES (1, 'hrag.config', 'reference', NULL::text),
                              (2, 'hrag.tenant_collections', 'reference', NULL),
                              (3, 'hrag.documents', 'id', NULL),
                              (4, 'hrag.nodes', 'document_id', 'hrag.documents'),
                              (5, 'hrag.document_terms', 'document_id', 'hrag.documents'))
                       AS s(ord, tbl, col, colocate)
         ORDER BY ord
    LOOP
        SELECT CASE p.partmethod WHEN 'n' THEN 'reference'
                                 ELSE 'by ' || pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END
          INTO method
          FROM pg_dist_partition p WHERE p.logicalrelid = spec.tbl::regclass;
        IF FOUND THEN
            table_name := spec.tbl; distribution := method; action := 'already distributed';
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF spec.col = 'reference' THEN
            PERFORM create_reference_table(spec.tbl::regclass);
            distribution := 'reference';
        ELSIF spec.colocate IS NULL THEN
            IF shard_count IS NULL THEN
                PERFORM create_distributed_table(spec.tbl::regclass, spec.col);
            ELSE
                PERFORM create_distributed_table(spec.tbl::regclass, spec.col, shard_count => shard_count);
            END IF;
            distribution := 'by ' || spec.col;
        ELSE
            PERFORM create_distributed_table(spec.tbl::regclass, spec.col, colocate_with => spec.colocate);
            distribution := 'by ' || spec.col || ', colocated with ' || spec.colocate;
        END IF;
        moved := spec.tbl || moved;
        table_name := spec.tbl; action := 'distributed';
        RETURN NEXT;
    END LOOP;
    -- The rows were copied to the shards; free their now invisible local copies
    -- (referencing tables first).
    FOREACH tbl IN ARRAY moved LOOP
        PERFORM truncate_local_data_after_distributing_table(tbl::regclass);
    END LOOP;

    -- Per-document functions run where the document lives: a call is
    -- delegated to the worker holding the shard of its document_id argument
    -- (the per-document retrieval steps the coordinator calls join this list).
    IF NOT EXISTS (SELECT 1 FROM pg_dist_object
                    WHERE objid = 'hrag.node_text(uuid, uuid)'::regprocedure
                      AND distribution_argument_index IS NOT NULL AND force_delegation) THEN
        -- force_delegation: also inside transaction blocks (every SQLAlchemy
        -- read is one); safe because the function only reads its document.
        PERFORM create_distributed_function('hrag.node_text(uuid, uuid)'::regprocedure, 'document_id',
                                            colocate_with => 'hrag.nodes', force_delegation => true);
        action := 'distributed';
    ELSE
        action := 'already distributed';
    END IF;
    table_name := 'hrag.node_text(uuid, uuid)'; distribution := 'by document_id, colocated with hrag.nodes';
    RETURN NEXT;
END
$$;

DROP FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer);
DROP FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean);
DROP FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean);
DROP FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]);
DROP FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]);
DROP FUNCTION hrag._parent_child_hits(uuid[], uuid[], real[], integer, integer);
DROP FUNCTION hrag._parents_each(uuid[], uuid[]);
DROP FUNCTION hrag._parents_document(uuid, uuid[], bigint[]);
DROP FUNCTION hrag._auto_merge_ranked(uuid[], uuid[], real[], real);
DROP FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real);
DROP FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real);
DROP FUNCTION hrag._node_rows_each(uuid[], uuid[]);
DROP FUNCTION hrag._node_rows_document(uuid, uuid[]);
DROP FUNCTION hrag._document_ids(uuid[]);

ALTER FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) ROWS 30;
ALTER FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) ROWS 4;
ALTER FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) ROWS 4;
ALTER FUNCTION hrag.auto_merge_hits(uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) ROWS 10;
ALTER FUNCTION hrag.retrieve_hits(uuid[], real[], integer) ROWS 10;
ALTER FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) ROWS 10;
