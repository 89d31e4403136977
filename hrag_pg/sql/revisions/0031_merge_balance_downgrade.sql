-- hrag-pg revision 0031, downgrade: hrag._retrieve_hits as revision 0029
-- defined it, before a level merged only where its evidence is spread over
-- its children (hrag.auto_merge_balance).

-- hrag._retrieve_hits (last changed in revision 0029)
-- The choice.  Every node on a hit's path to its root is a candidate, valued
-- by the evidence under it (hit weights exp((score - best) / sharpness), on
-- search_hybrid's calibrated scale, where 0 is the question's background
-- and differences mean the same under every model) per
-- tokens^size_exponent, so a section most of whose children are hit can
-- outrank its best leaf.  Only hits scoring at least `vote` of the best are
-- evidence for a merge, and a node that is not a hit is a candidate only as
-- a merge: two or more such hits covering merge_share of its tokens and,
-- above the level of leaves, merge_ratio of its children (auto-merge's
-- levels: a chapter is not merged because one article is hit).  So a
-- narrow question ends at its item or article, a broad one at its article,
-- whatever the collection's size.  Candidates are taken greedily, a node
-- replacing the taken nodes inside it; the best hits keep room in the
-- budget, and a passage is taken only while what it adds is worth its
-- tokens: the budget is a ceiling, not a target.  The constants are
-- hrag.auto_* settings; docs/decisions.md, "Budget mode: ..." (five
-- sections), says why each rule and value.
CREATE OR REPLACE FUNCTION hrag._retrieve_hits(node_ids uuid[], document_ids uuid[], scores real[], max_tokens integer) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    sharpness     double precision := hrag._setting('hrag.auto_sharpness', 0.105);
    size_exponent double precision := hrag._setting('hrag.auto_size_exponent', 0.5);
    -- a hit votes for a merge when it scores this share of the best, or
    -- sibling_vote of it beside one that does
    vote          double precision := hrag._setting('hrag.auto_vote', 0.6);
    sibling_vote  double precision := hrag._setting('hrag.auto_sibling_vote', 0.5);
    -- a merge: two or more voting hits covering at least merge_share of the
    -- node's tokens, and (when its hit children are not leaves) voting hits
    -- in at least merge_ratio of its children.  A merge keeps its whole value
    -- when it replaces taken nodes; a node that is neither a hit nor a merge
    -- is no candidate
    merge_share   double precision := hrag._setting('hrag.auto_merge_share', 0.25);
    merge_ratio   double precision := hrag._setting('hrag.auto_merge_ratio', 0.5);
    -- the best this many hits keep room in the budget (the reserved hits)
    reserved      integer := least(greatest(hrag._setting('hrag.auto_reserved_hits', 2), 0), 1000)::integer;
    -- what a passage must be worth to be taken, in the evidence of the best
    -- hit (weight 1): this much per token it adds, plus this much for a new
    -- passage; the budget is a ceiling, not a target
    token_cost    double precision := hrag._setting('hrag.auto_token_cost', 0.002);
    passage_cost  double precision := hrag._setting('hrag.auto_passage_cost', 0.05);
    -- no passage this small but the best hit: a word or a label says nothing
    min_tokens    double precision := hrag._setting('hrag.auto_min_tokens', 6);
    best_score    real;
    node_value    double precision;
    r_doc         uuid[] := '{}';
    r_seq         integer[] := '{}';
    r_tok         integer[] := '{}';
    r_done        boolean[] := '{}';
    r_sum         integer := 0;
    reserve_tokens integer;
    r_at          integer;
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
    voter_ids     uuid[];
    sibling_ids   uuid[];
    sel_docs      uuid[];
    -- the candidates, best priority first (c_*), and those set aside (aside_*)
    c_node        uuid[];
    c_doc         uuid[];
    c_evidence    double precision[];
    c_seq         integer[];
    c_end         integer[];
    c_tokens      integer[];
    c_priority    double precision[];
    c_single_hit  boolean[];
    c_children    integer[];
    c_merge       boolean[];
    c_is_hit      boolean[];
    c_depth       integer[];
    c_leaves      boolean[];
    c_voted       integer[];
    c_child_count integer[];
    voted_merges  integer;
    covered       integer[];
    k             integer;
    m             integer;
    aside_at      integer[] := '{}';
    aside_priority double precision[] := '{}';
    sel_evidence  double precision[] := '{}';
    next_at       integer := 1;
    j             integer;
    best_aside    integer;
    priority      double precision;
    cur_doc       uuid;
    cur_seq       integer;
    cur_end       integer;
    cur_tokens    integer;
    added         double precision;
    below_evidence double precision;
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    IF max_tokens IS NULL OR max_tokens < 1 OR max_tokens > 100000 THEN
        RAISE EXCEPTION 'hrag: argument "max_tokens" must be between 1 and 100000, got %',
            coalesce(max_tokens::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The hits (a duplicate id keeps its best score), their weights and the
    -- voting ones; the ancestor climb runs per document
    -- (hrag._budget_candidates_document).
    WITH hit AS (
        SELECT h.id, max(h.score) AS score FROM unnest(node_ids, scores) AS h(id, score) GROUP BY h.id
    ),
    weighted AS (
        SELECT hit.id, hit.score, max(hit.score) OVER () AS best,
               exp(greatest((hit.score - max(hit.score) OVER ())::double precision / sharpness, -50)) AS weight
          FROM hit
    )
    SELECT array_agg(w.id), array_agg(w.score), array_agg(w.weight), max(w.score),
           -- (scores at or below 0 say nothing: then every hit votes)
           coalesce(array_agg(w.id) FILTER (WHERE w.best <= 0 OR w.score >= vote * w.best), '{}'),
           coalesce(array_agg(w.id) FILTER (WHERE w.best <= 0 OR w.score >= sibling_vote * w.best), '{}')
      INTO hit_ids, hit_scores, hit_weights, best_score, voter_ids, sibling_ids
      FROM weighted w;
    hit_docs := ARRAY(SELECT (SELECT d.doc FROM unnest(node_ids, document_ids) AS d(id, doc)
                               WHERE d.id = h.id AND d.doc IS NOT NULL LIMIT 1)
                        FROM unnest(hit_ids) WITH ORDINALITY AS h(id, ord)
                       ORDER BY h.ord);

    -- The candidates worth taking at all, best priority first: the hits, and
    -- the merges.
    WITH cands AS MATERIALIZED (
        SELECT * FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores, hit_weights)
    ),
    -- the voting hits: those scoring `vote` of the best, and their siblings
    -- (the hits under the same parent as one of them): a section's weaker
    -- paragraphs beside its best one are its evidence, weak hits elsewhere
    -- are not
    hit_parents AS MATERIALIZED (
        SELECT h.node_id, h.document_id, h.seq, h.subtree_tokens, p.node_id AS parent
          FROM cands h
          LEFT JOIN cands p ON p.document_id = h.document_id AND p.depth = h.depth - 1
                           AND h.seq BETWEEN p.seq AND p.subtree_end
         WHERE h.node_id = ANY (hit_ids)
    ),
    voters AS MATERIALIZED (
        SELECT h.node_id, h.document_id, h.seq, h.subtree_tokens
          FROM hit_parents h
         WHERE h.node_id = ANY (voter_ids)
            OR (h.node_id = ANY (sibling_ids)
                AND h.parent IN (SELECT s.parent FROM hit_parents s WHERE s.node_id = ANY (voter_ids)))
    )
    SELECT coalesce(array_agg(x.node_id ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id), '{}'),
           array_agg(x.document_id ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.evidence ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.seq ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.subtree_end ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.subtree_tokens ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.priority ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.hits = 1 AND x.child_count = 0 ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.children_hit::integer ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.covered ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.node_id = ANY (hit_ids) ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.depth ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.leaves ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.voted::integer ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.child_count ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id)
      INTO c_node, c_doc, c_evidence, c_seq, c_end, c_tokens, c_priority, c_single_hit, c_children, c_merge,
           c_is_hit, c_depth, c_leaves, c_voted, c_child_count
      FROM (SELECT cand.*, k.leaves, k.voted,
                   -- its voting hits cover enough of it (the levels are checked below)
                   NOT (cand.node_id = ANY (hit_ids))
                   AND v.voters >= 2 AND v.voter_tokens >= merge_share * greatest(cand.subtree_tokens, 1) AS covered,
                   cand.evidence / power(greatest(cand.subtree_tokens, 1), size_exponent) AS priority
              FROM cands AS cand
              -- the voting hits inside and their tokens (each hit is a candidate of its own)
              CROSS JOIN LATERAL (
                  SELECT count(*) AS voters, coalesce(sum(h.subtree_tokens), 0)::double precision AS voter_tokens
                    FROM voters h
                   WHERE h.document_id = cand.document_id AND h.seq BETWEEN cand.seq AND cand.subtree_end) AS v
              -- its children on the hits' paths (the candidates a level down
              -- inside it): whether they are leaves, and how many hold a voting hit
              CROSS JOIN LATERAL (
                  SELECT coalesce(bool_and(c.child_count = 0), true) AS leaves,
                         count(*) FILTER (WHERE EXISTS (
                             SELECT 1 FROM voters h
                              WHERE h.document_id = c.document_id AND h.seq BETWEEN c.seq AND c.subtree_end)) AS voted
                    FROM cands c
                   WHERE c.document_id = cand.document_id AND c.depth = cand.depth + 1
                     AND c.seq BETWEEN cand.seq AND cand.subtree_end) AS k) AS x
     WHERE (x.covered OR x.node_id = ANY (hit_ids))
       AND x.subtree_tokens <= max_tokens
       AND (x.subtree_tokens >= min_tokens OR x.best >= best_score);

    -- The levels, bottom-up: above the nodes whose hit children are leaves, a
    -- node is a merge only if voting hits lie in merge_ratio of its children
    -- and in two of them, or in its one child that is a merge itself (a
    -- document of one chapter is merged only if the chapter is).
    -- (only the covered candidates can be merges: the loops run over them, deepest first)
    covered := ARRAY(SELECT i FROM generate_subscripts(c_node, 1) AS i WHERE c_merge[i] ORDER BY c_depth[i] DESC);
    FOREACH k IN ARRAY covered LOOP
        CONTINUE WHEN c_leaves[k];
        voted_merges := 0;
        FOREACH m IN ARRAY covered LOOP
            IF c_depth[m] = c_depth[k] + 1 AND c_merge[m] AND c_doc[m] = c_doc[k]
               AND c_seq[m] BETWEEN c_seq[k] AND c_end[k] THEN
                voted_merges := voted_merges + 1;
            END IF;
        END LOOP;
        c_merge[k] := c_voted[k] >= merge_ratio * c_child_count[k] AND (c_voted[k] >= 2 OR voted_merges >= 1);
    END LOOP;

    -- The reserved hits: the best `reserved` hits among the candidates, in
    -- score order, as many as fit the budget together.
    FOR r_at IN SELECT array_position(c_node, h.id)
                  FROM unnest(hit_ids, hit_scores) AS h(id, score)
                 ORDER BY h.score DESC, h.id
                 LIMIT reserved LOOP
        CONTINUE WHEN r_at IS NULL OR r_sum + c_tokens[r_at] > max_tokens
                   OR c_evidence[r_at] < token_cost * c_tokens[r_at] + passage_cost;
        r_doc := r_doc || c_doc[r_at];
        r_seq := r_seq || c_seq[r_at];
        r_tok := r_tok || c_tokens[r_at];
        r_done := r_done || false;
        r_sum := r_sum + c_tokens[r_at];
    END LOOP;

    -- Greedy by priority: take each candidate that fits, a node replacing the
    -- taken nodes inside it.  Such a node is worth what it adds (the evidence
    -- not yet taken per power of the tokens it adds) unless its hits cover a
    -- merge_share of its tokens; worth less than its place in the order, it is set
    -- aside and comes back when the order reaches its new priority.  No node is
    -- taken that would leave too little room for the reserved hits it does not
    -- hold, so a large section with many weak hits cannot crowd out the best
    -- passage elsewhere.  After the first, a node is taken only if what it
    -- adds is worth its tokens (token_cost, passage_cost): a narrow question
    -- stops after a few passages, a broad one goes on while its evidence lasts.
    LOOP
        best_aside := 0;
        FOR i IN 1 .. cardinality(aside_at) LOOP
            IF best_aside = 0 OR aside_priority[i] > aside_priority[best_aside] THEN
                best_aside := i;
            END IF;
        END LOOP;
        IF best_aside > 0 AND (next_at > cardinality(c_node) OR aside_priority[best_aside] >= c_priority[next_at]) THEN
            j := aside_at[best_aside];
            priority := aside_priority[best_aside];
            aside_at := aside_at[:best_aside - 1] || aside_at[best_aside + 1:];
            aside_priority := aside_priority[:best_aside - 1] || aside_priority[best_aside + 1:];
        ELSIF next_at <= cardinality(c_node) THEN
            j := next_at;
            priority := c_priority[j];
            next_at := next_at + 1;
        ELSE
            EXIT;
        END IF;
        CONTINUE WHEN NOT (c_merge[j] OR c_is_hit[j]);  -- (not a merge after all: its levels)
        cur_doc := c_doc[j];
        cur_seq := c_seq[j];
        cur_end := c_end[j];
        cur_tokens := c_tokens[j];

        inside := false;
        below_tokens := 0;
        below_evidence := 0;
        below_any := false;
        FOR i IN 1 .. cardinality(sel_ids) LOOP
            CONTINUE WHEN NOT alive[i] OR sel_doc[i] <> cur_doc;
            IF cur_seq BETWEEN sel_seq[i] AND sel_end[i] THEN
                inside := true;
                EXIT;
            END IF;
            IF sel_seq[i] BETWEEN cur_seq AND cur_end THEN
                below_tokens := below_tokens + sel_tok[i];
                below_evidence := below_evidence + sel_evidence[i];
                below_any := true;
            END IF;
        END LOOP;
        CONTINUE WHEN inside;
        IF below_any AND NOT c_merge[j] THEN
            added := (c_evidence[j] - below_evidence) / power(greatest(cur_tokens - below_tokens, 1), size_exponent);
            IF added < priority THEN
                aside_at := aside_at || j;
                aside_priority := aside_priority || added;
                CONTINUE;
            END IF;
        END IF;
        IF first_priority IS NOT NULL THEN
            -- a merge brings its whole evidence; any other node what it adds
            node_value := CASE WHEN below_any AND c_merge[j] THEN c_evidence[j]
                               ELSE c_evidence[j] - below_evidence END;
            CONTINUE WHEN node_value < token_cost * (cur_tokens - below_tokens)
                                       + CASE WHEN below_any THEN 0 ELSE passage_cost END;
        END IF;
        reserve_tokens := 0;
        FOR i IN 1 .. cardinality(r_doc) LOOP
            CONTINUE WHEN r_done[i] OR (r_doc[i] = cur_doc AND r_seq[i] BETWEEN cur_seq AND cur_end);
            reserve_tokens := reserve_tokens + r_tok[i];
        END LOOP;
        CONTINUE WHEN used - below_tokens + cur_tokens + reserve_tokens > max_tokens;
        FOR i IN 1 .. cardinality(r_doc) LOOP
            IF r_doc[i] = cur_doc AND r_seq[i] BETWEEN cur_seq AND cur_end THEN
                r_done[i] := true;
            END IF;
        END LOOP;
        IF below_any THEN
            -- the node replaces the taken nodes inside it
            FOR i IN 1 .. cardinality(sel_ids) LOOP
                IF alive[i] AND sel_doc[i] = cur_doc AND sel_seq[i] BETWEEN cur_seq AND cur_end THEN
                    alive[i] := false;
                END IF;
            END LOOP;
        END IF;
        used := used - below_tokens + cur_tokens;
        first_priority := coalesce(first_priority, priority);
        sel_ids := sel_ids || c_node[j];
        sel_doc := sel_doc || cur_doc;
        sel_seq := sel_seq || cur_seq;
        sel_end := sel_end || cur_end;
        sel_tok := sel_tok || cur_tokens;
        sel_evidence := sel_evidence || c_evidence[j];
        alive := alive || true;
        sel_why := sel_why || CASE WHEN c_single_hit[j] THEN 'hit' ELSE 'merged' END;
        sel_children := sel_children || c_children[j];
    END LOOP;

    sel_why := ARRAY(SELECT w FROM unnest(sel_why, alive) WITH ORDINALITY AS x(w, a, i) WHERE a ORDER BY i);
    sel_ids := ARRAY(SELECT v FROM unnest(sel_ids, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_docs := ARRAY(SELECT v FROM unnest(sel_doc, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_children := ARRAY(SELECT v FROM unnest(sel_children, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_evidence := ARRAY(SELECT v FROM unnest(sel_evidence, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);

    IF cardinality(sel_ids) = 0 THEN
        -- No candidate was worth taking (or fitted): the best hit that fits (and
        -- is not a scrap), so a hit never yields nothing; if none fits, the
        -- best hit alone, flagged.
        SELECT ARRAY[n.id], ARRAY[n.document_id],
               ARRAY[CASE WHEN n.subtree_tokens <= max_tokens THEN 'hit'
                          ELSE 'over budget: the best hit alone is larger than max_tokens' END],
               n.subtree_tokens > max_tokens
          INTO sel_ids, sel_docs, sel_why, over_budget
          FROM unnest(node_ids, document_ids, scores) AS h(id, doc, score)
          JOIN hrag.nodes n ON n.document_id = h.doc AND n.id = h.id
         WHERE n.subtree_tokens >= min_tokens OR h.score >= best_score
         ORDER BY n.subtree_tokens > max_tokens, h.score DESC, n.id
         LIMIT 1;
        -- (the rare path: the climb again, for that node's count of hit children)
        sel_children := ARRAY[coalesce((SELECT cand.children_hit::integer
                                          FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores,
                                                                            hit_weights) AS cand
                                         WHERE cand.node_id = sel_ids[1]), 0)];
    END IF;

    -- Ranked by the evidence each holds, then by its best hit: a merged
    -- article whose hits together outweigh one better-scoring item comes first.
    RETURN QUERY
    SELECT r.node_id, r.document_id, r.depth, r.title, r.heading_path, r.content, r.score, r.merged_from,
           r.hit_ratio,
           (row_number() OVER (ORDER BY e.evidence DESC NULLS LAST, r.score DESC, r.depth, r.node_id))::integer,
           r.token_count, r.reason
      FROM hrag._budget_rows_each(sel_ids, sel_docs, sel_why, sel_children, node_ids, document_ids, scores,
                                  over_budget) AS r
      LEFT JOIN unnest(sel_ids, sel_evidence) AS e(id, evidence) ON e.id = r.node_id
     ORDER BY e.evidence DESC NULLS LAST, r.score DESC, r.depth, r.node_id;
END
$$;
COMMENT ON FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) IS
    'internal: the budget mode for hits with their documents, not part of the API';
