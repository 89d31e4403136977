-- Undo revision 0014: revision 0012's hrag._retrieve_hits and revision 0007's hrag._setting, verbatim.
-- Current definitions: hrag_pg/sql/budget.sql, common.sql.

CREATE OR REPLACE FUNCTION hrag._retrieve_hits(
    node_ids     uuid[],
    document_ids uuid[],
    scores       real[],
    max_tokens   integer
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
    sel_children  integer[] := '{}';
    alive         boolean[] := '{}';
    inside        boolean;
    below_tokens  integer;
    below_any     boolean;
    used          integer := 0;
    first_priority double precision;
    over_budget   boolean := false;
    hit_ids       uuid[];
    hit_docs      uuid[];
    hit_scores    real[];
    hit_weights   double precision[];
    total_weight  double precision;
    sel_docs      uuid[];
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
     WHERE d.collection IN (SELECT h.collection FROM hrag.documents h WHERE h.id = ANY (document_ids));

    -- The hits (a duplicate id keeps its best score) and their weights; the
    -- ancestor climb runs per document (hrag._budget_candidates_document).
    WITH hit AS (
        SELECT h.id, max(h.score) AS score FROM unnest(node_ids, scores) AS h(id, score) GROUP BY h.id
    ),
    weighted AS (
        SELECT hit.id, hit.score,
               exp(greatest((hit.score - max(hit.score) OVER ())::double precision / sharpness, -50)) AS weight
          FROM hit
    )
    SELECT array_agg(w.id), array_agg(w.score), array_agg(w.weight), (SELECT sum(w.weight) FROM weighted w)
      INTO hit_ids, hit_scores, hit_weights, total_weight
      FROM weighted w;
    hit_docs := ARRAY(SELECT (SELECT d.doc FROM unnest(node_ids, document_ids) AS d(id, doc)
                               WHERE d.id = h.id AND d.doc IS NOT NULL LIMIT 1)
                        FROM unnest(hit_ids) WITH ORDINALITY AS h(id, ord)
                       ORDER BY h.ord);

    FOR c IN
        SELECT cand.node_id AS node, cand.evidence, cand.best, cand.hits, cand.children_hit, cand.document_id,
               cand.seq, cand.subtree_end, cand.subtree_tokens, cand.child_count, cand.depth,
               cand.evidence / power(greatest(cand.subtree_tokens, 1), size_exponent) AS priority,
               -- share of the evidence over share of the searched text: 1 = no better than chance
               (cand.evidence / total_weight)
                   / (greatest(cand.subtree_tokens, 1) / scope_tokens) AS lift
          FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores, hit_weights) AS cand
         ORDER BY priority DESC, cand.best DESC, cand.depth DESC, cand.node_id
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
        sel_children := sel_children || c.children_hit::integer;
    END LOOP;

    sel_why := ARRAY(SELECT w FROM unnest(sel_why, alive) WITH ORDINALITY AS x(w, a, i) WHERE a ORDER BY i);
    sel_ids := ARRAY(SELECT v FROM unnest(sel_ids, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_docs := ARRAY(SELECT v FROM unnest(sel_doc, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_children := ARRAY(SELECT v FROM unnest(sel_children, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);

    IF cardinality(sel_ids) = 0 THEN
        -- No candidate was worth taking (or fitted): the best hit that fits, so a
        -- hit never yields nothing; if none fits, the best hit alone, flagged.
        SELECT ARRAY[n.id], ARRAY[n.document_id],
               ARRAY[CASE WHEN n.subtree_tokens <= max_tokens THEN 'hit'
                          ELSE 'over budget: the best hit alone is larger than max_tokens' END],
               n.subtree_tokens > max_tokens
          INTO sel_ids, sel_docs, sel_why, over_budget
          FROM unnest(node_ids, document_ids, scores) AS h(id, doc, score)
          JOIN hrag.nodes n ON n.document_id = h.doc AND n.id = h.id
         ORDER BY n.subtree_tokens > max_tokens, h.score DESC, n.id
         LIMIT 1;
        -- (the rare path: the climb again, for that node's count of hit children)
        sel_children := ARRAY[coalesce((SELECT cand.children_hit::integer
                                          FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores,
                                                                            hit_weights) AS cand
                                         WHERE cand.node_id = sel_ids[1]), 0)];
    END IF;

    RETURN QUERY
    SELECT r.node_id, r.document_id, r.depth, r.title, r.heading_path, r.content, r.score, r.merged_from,
           r.hit_ratio, (row_number() OVER (ORDER BY r.score DESC, r.depth, r.node_id))::integer,
           r.token_count, r.reason
      FROM hrag._budget_rows_each(sel_ids, sel_docs, sel_why, sel_children, node_ids, document_ids, scores,
                                  over_budget) AS r
     ORDER BY r.score DESC, r.depth, r.node_id;
END
$$;

-- (CREATE OR REPLACE resets the planner's row estimate)
ALTER FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) ROWS 10;

-- A numeric tuning setting (SET hrag.auto_floor = 0.5), or its default.
CREATE OR REPLACE FUNCTION hrag._setting(name text, default_value double precision)
RETURNS double precision
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(nullif(current_setting(name, true), '')::double precision, default_value)
$$;
