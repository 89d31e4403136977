-- hrag-pg, budget.sql: the budget mode: the best non-overlapping context
-- within max_tokens, each node with the reason it was chosen.
--
--   hrag.retrieve(question)   -> search_hybrid (search.sql) -> _retrieve_hits
--   hrag.retrieve_hits(hits)  -> _document_ids (common.sql)  -> _retrieve_hits
--   _retrieve_hits: the choice -> _budget_candidates_each -> _budget_candidates_document
--                              -> _budget_rows_each -> _budget_rows_document -> text.sql
--   _fit_budget: parent-child's and auto-merge's results within a budget,
--                falling back on _retrieve_hits for a result too large.
-- The *_each / *_document pairs run once per document on Citus (so each
-- statement goes to one worker) and once for all documents elsewhere.
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.retrieve (last changed in revision 0012)
-- The budget mode for a question: the candidate stage (search_hybrid, top_k
-- vector candidates plus the lexical ones), then the budget step, in one
-- round trip.  PL/pgSQL, so the hits are gathered once into arrays and the
-- plan is cached: a LANGUAGE sql body would read its CTE three times and be
-- planned again on every call.
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
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    hit_ids    uuid[];
    hit_docs   uuid[];
    hit_scores real[];
BEGIN
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.document_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO hit_ids, hit_docs, hit_scores
      FROM hrag.search_hybrid(query, query_text, top_k, collection, filter, lexical_weight, top_k) AS s;
    RETURN QUERY SELECT * FROM hrag._retrieve_hits(hit_ids, hit_docs, hit_scores, max_tokens) AS r ORDER BY r.rank;
END
$$;
ALTER FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) ROWS 10;
COMMENT ON FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) IS
    'Budget-aware retrieval: candidates (vector + lexical) -> the best non-overlapping context within max_tokens';

-- hrag.retrieve_hits (last changed in revision 0010)
-- The budget mode for hits from anywhere (a reranker, a keyword search): the
-- same choice as hrag.retrieve's, after looking up each hit's document.
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
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY SELECT * FROM hrag._retrieve_hits(node_ids, hrag._document_ids(node_ids), scores, max_tokens);
END
$$;
ALTER FUNCTION hrag.retrieve_hits(uuid[], real[], integer) ROWS 10;
COMMENT ON FUNCTION hrag.retrieve_hits(uuid[], real[], integer) IS
    'The best non-overlapping context within max_tokens for hits from anywhere, with why each node was chosen';

-- hrag._retrieve_hits (last changed in revision 0031)
-- The choice.  Every node on a hit's path to its root is a candidate, valued
-- by the evidence under it (hit weights exp((score - best) / sharpness), on
-- search_hybrid's calibrated scale, where 0 is the question's background
-- and differences mean the same under every model) per
-- tokens^size_exponent, so a section most of whose children are hit can
-- outrank its best leaf.  Only hits scoring at least `vote` of the best are
-- evidence for a merge, and a node that is not a hit is a candidate only as
-- a merge: two or more such hits covering merge_share of its tokens and,
-- above the level of leaves, merge_ratio of its children (auto-merge's
-- levels: a chapter is not merged because one article is hit), and only if
-- its evidence is spread: its second-best child holds merge_balance of its
-- best child's (a chapter is not merged around the one article that holds
-- nearly all of its evidence).  So a narrow question ends at its item or
-- article, a broad one at its article, whatever the collection's size.
-- Candidates are taken greedily, a node replacing the taken nodes inside
-- it; the best hits keep room in the budget, and a passage is taken only
-- while what it adds is worth its tokens: the budget is a ceiling, not a
-- target.  The constants are hrag.auto_* settings; docs/decisions.md, its
-- "Budget mode: ..." sections, says why each rule and value.
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
    -- ... and the evidence of its second-best child at least this share of
    -- its best child's (children that are groups, which ingestion made and
    -- no author wrote, do not count as a level)
    merge_balance double precision := hrag._setting('hrag.auto_merge_balance', 0.3);
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
    c_balanced    boolean[];
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
    ),
    -- the candidates that are groups (kind 'group': hrag_pg.ingest.groups)
    groups AS MATERIALIZED (
        SELECT n.id
          FROM cands c
          JOIN hrag.nodes n ON n.document_id = c.document_id AND n.id = c.node_id
         WHERE c.child_count > 0 AND n.kind = 'group'
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
           array_agg(x.child_count ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id),
           array_agg(x.grouped OR x.second_evidence >= merge_balance * x.best_evidence
                     ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id)
      INTO c_node, c_doc, c_evidence, c_seq, c_end, c_tokens, c_priority, c_single_hit, c_children, c_merge,
           c_is_hit, c_depth, c_leaves, c_voted, c_child_count, c_balanced
      FROM (SELECT cand.*, k.leaves, k.voted, k.grouped, k.best_evidence, k.second_evidence,
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
              -- inside it): whether they are leaves, how many hold a voting hit,
              -- whether any is a group, and the evidence of the best two
              CROSS JOIN LATERAL (
                  SELECT coalesce(bool_and(c.child_count = 0), true) AS leaves,
                         count(*) FILTER (WHERE EXISTS (
                             SELECT 1 FROM voters h
                              WHERE h.document_id = c.document_id AND h.seq BETWEEN c.seq AND c.subtree_end)) AS voted,
                         coalesce(bool_or(c.node_id IN (SELECT g.id FROM groups g)), false) AS grouped,
                         coalesce(max(c.evidence), 0) AS best_evidence,
                         coalesce((array_agg(c.evidence ORDER BY c.evidence DESC))[2], 0) AS second_evidence
                    FROM cands c
                   WHERE c.document_id = cand.document_id AND c.depth = cand.depth + 1
                     AND c.seq BETWEEN cand.seq AND cand.subtree_end) AS k) AS x
     WHERE (x.covered OR x.node_id = ANY (hit_ids))
       AND x.subtree_tokens <= max_tokens
       AND (x.subtree_tokens >= min_tokens OR x.best >= best_score);

    -- The levels, bottom-up: above the nodes whose hit children are leaves, a
    -- node is a merge only if voting hits lie in merge_ratio of its children
    -- and in two of them, or in its one child that is a merge itself, and its
    -- evidence is spread over its children (merge_balance; groups aside, a
    -- node whose evidence lies in one child is that child: a document of one
    -- chapter comes back as the chapter, which holds all but its title).
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
        c_merge[k] := c_voted[k] >= merge_ratio * c_child_count[k] AND (c_voted[k] >= 2 OR voted_merges >= 1)
                      AND c_balanced[k];
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

-- hrag._budget_candidates_document (last changed in revision 0012)
-- The candidates of one document (doc NULL: of every document at once): one
-- recursive climb from the hits to their roots, each node once with its
-- summed evidence, its best hit, its hits and how many of its children lead
-- to one.  Filtering on document_id keeps the statement on one Citus shard.
CREATE OR REPLACE FUNCTION hrag._budget_candidates_document(doc uuid, node_ids uuid[], scores real[],
                                                 weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               children_hit bigint, seq integer, subtree_end integer, subtree_tokens integer, child_count integer,
               depth integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE
    -- every hit's path to its root; `via` is the child the climb came from
    -- (the node's own columns ride along, so the candidates need no second lookup)
    chain AS (
        SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.document_id, n.parent_id, NULL::uuid AS via,
               n.seq, n.subtree_end, n.subtree_tokens, n.child_count, n.depth
          FROM unnest(node_ids, scores, weights) AS w(id, score, weight)
          JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = w.id
        UNION ALL
        SELECT c.hit, c.score, c.weight, p.id, p.document_id, p.parent_id, c.node,
               p.seq, p.subtree_end, p.subtree_tokens, p.child_count, p.depth
          FROM chain c
          JOIN hrag.nodes p ON p.document_id = coalesce(doc, c.document_id) AND p.id = c.parent_id
    )
    -- (the evidence summed in hit order: the same float whatever the grouping)
    SELECT c.node, c.document_id, sum(c.weight ORDER BY c.hit), max(c.score), count(*), count(DISTINCT c.via),
           c.seq, c.subtree_end, c.subtree_tokens, c.child_count, c.depth
      FROM chain c
     GROUP BY c.node, c.document_id, c.seq, c.subtree_end, c.subtree_tokens, c.child_count, c.depth;
END
$$;
ALTER FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) ROWS 100;
COMMENT ON FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the budget mode''s candidates on the hits'' paths, not part of the API';

-- hrag._budget_candidates_each (last changed in revision 0012)
-- Splits the hits by document for _budget_candidates_document where
-- hrag.nodes is distributed; elsewhere one call takes them all.
CREATE OR REPLACE FUNCTION hrag._budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[],
                                             weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               children_hit bigint, seq integer, subtree_end integer, subtree_tokens integer, child_count integer,
               depth integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc    uuid;
    doc_ids     uuid[];
    doc_scores  real[];
    doc_weights double precision[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN h.doc END
                      FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord), array_agg(h.weight ORDER BY h.ord)
          INTO doc_ids, doc_scores, doc_weights
          FROM unnest(node_ids, document_ids, scores, weights) WITH ORDINALITY AS h(id, doc, score, weight, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._budget_candidates_document(this_doc, doc_ids, doc_scores, doc_weights);
    END LOOP;
END
$$;
ALTER FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) ROWS 100;
COMMENT ON FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) IS
    'internal: hrag._budget_candidates_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';

-- hrag._budget_rows_document (last changed in revision 0012)
-- The result rows of the chosen nodes of one document: their full text, the
-- hits they absorbed (merged_from), their hit ratio and the reason they were
-- chosen.  picked_children: per chosen node, how many of its children lead
-- to a hit (from hrag._budget_candidates_document).
CREATE OR REPLACE FUNCTION hrag._budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], picked_children integer[],
                                           node_ids uuid[], scores real[], over_budget boolean)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        WITH hit AS (
            SELECT n.id, n.document_id, n.seq, max(h.score) AS score
              FROM unnest(node_ids, scores) AS h(id, score)
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = h.id
             GROUP BY n.id, n.document_id, n.seq
        ),
        picked AS (
            SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens,
                   n.child_count, pk.why, pk.children_hit
              FROM unnest(picked_ids, picked_why, picked_children) AS pk(id, why, children_hit)
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = pk.id
        ),
        -- the hits inside each picked node
        absorbed AS (
            SELECT p.id,
                   max(hit.score) AS best,
                   coalesce(array_agg(hit.id ORDER BY hit.score DESC, hit.id) FILTER (WHERE hit.id <> p.id), '{}')
                       AS merged_from,
                   count(*) AS hits_inside
              FROM picked p
              JOIN hit ON hit.document_id = p.document_id AND hit.seq BETWEEN p.seq AND p.subtree_end
             GROUP BY p.id
        )
        SELECT p.id, p.document_id, p.depth, p.title, p.heading_path, p.seq, p.subtree_end,
               a.best::real AS best, a.merged_from,
               CASE WHEN p.child_count > 0 THEN (p.children_hit::real / p.child_count)::real END AS hit_ratio,
               p.subtree_tokens,
               CASE WHEN over_budget THEN p.why
                    WHEN p.why = 'hit' THEN 'direct hit'
                    ELSE format('%s of %s children hit, %s hits inside', p.children_hit, p.child_count, a.hits_inside)
               END AS reason
          FROM picked p
          JOIN absorbed a ON a.id = p.id
    LOOP
        node_id := x.id;
        document_id := x.document_id;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
        score := x.best;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        reason := x.reason;
        RETURN NEXT;
    END LOOP;
END
$$;
ALTER FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean) ROWS 10;
COMMENT ON FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the chosen nodes with what they absorbed, not part of the API';

-- hrag._budget_rows_each (last changed in revision 0012)
-- Splits the chosen nodes and the hits by document for _budget_rows_document
-- where hrag.nodes is distributed; elsewhere one call takes them all.
CREATE OR REPLACE FUNCTION hrag._budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[],
                                       picked_children integer[], node_ids uuid[], document_ids uuid[],
                                       scores real[], over_budget boolean)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc     uuid;
    doc_picked   uuid[];
    doc_why      text[];
    doc_children integer[];
    doc_ids      uuid[];
    doc_scores   real[];
    -- Where hrag.nodes is distributed (Citus): one call per document, each
    -- delegated to its document's worker.  Elsewhere: one call for all the
    -- documents (doc NULL), no per-document overhead.
    per_document boolean := to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
BEGIN
    IF per_document THEN
        per_document := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                 WHERE logicalrelid = 'hrag.nodes'::regclass);
    END IF;
    FOR this_doc IN SELECT DISTINCT CASE WHEN per_document THEN p.doc END
                      FROM unnest(picked_docs) AS p(doc) WHERE p.doc IS NOT NULL LOOP
        SELECT array_agg(p.id ORDER BY p.ord), array_agg(p.why ORDER BY p.ord), array_agg(p.children ORDER BY p.ord)
          INTO doc_picked, doc_why, doc_children
          FROM unnest(picked_ids, picked_docs, picked_why, picked_children)
               WITH ORDINALITY AS p(id, doc, why, children, ord)
         WHERE p.doc = coalesce(this_doc, p.doc);
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.score ORDER BY h.ord), '{}')
          INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._budget_rows_document(this_doc, doc_picked, doc_why, doc_children, doc_ids,
                                                              doc_scores, over_budget);
    END LOOP;
END
$$;
ALTER FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], integer[], uuid[], uuid[], real[], boolean) ROWS 10;
COMMENT ON FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], integer[], uuid[], uuid[], real[], boolean) IS
    'internal: hrag._budget_rows_document for each document of the chosen nodes on Citus, once for all of them elsewhere, not part of the API';

-- hrag._fit_budget (last changed in revision 0026)
-- Parent-child and auto-merge contexts under a token budget, in the same
-- statement as their results (queries.py), so a budget costs no extra round
-- trip.  The results are taken best first,
-- each whole while it fits; one that does not is reported dropped and replaced
-- by the budget mode's choice among its own hits within the tokens left
-- (hrag._retrieve_hits), so a parent too large for the budget gives way to the
-- part of it around its best hit, not to smaller, worse results elsewhere.
-- Tokens are the stored counts (the nodes' subtree_tokens), as in the budget
-- mode.  One row per step: 'whole' and 'dropped' name a result by its
-- position (owner) and node; 'part' rows carry the part's own columns.
CREATE OR REPLACE FUNCTION hrag._fit_budget(
    result_ids    uuid[],     -- the results in the order they are taken, best first
    result_tokens integer[],
    hit_ids       uuid[],     -- the hits that chose each result ...
    hit_docs      uuid[],
    hit_scores    real[],
    hit_owner     integer[],  -- ... and the position of the result each belongs to
    max_tokens    integer
)
RETURNS TABLE (step integer, owner integer, kept text, node_id uuid, document_id uuid, title text,
               heading_path text[], content text, merged_from uuid[], hit_ratio real, token_count integer,
               reason text)
LANGUAGE plpgsql STABLE ROWS 10
AS $$
#variable_conflict use_column
DECLARE
    used integer := 0;
    part record;
BEGIN
    IF max_tokens IS NULL OR max_tokens < 1 OR max_tokens > 100000 THEN
        RAISE EXCEPTION 'hrag: argument "max_tokens" must be between 1 and 100000, got %',
            coalesce(max_tokens::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    step := 0;
    FOR i IN 1 .. coalesce(cardinality(result_ids), 0) LOOP
        step := step + 1;
        owner := i;
        node_id := result_ids[i];
        document_id := NULL; title := NULL; heading_path := NULL; content := NULL;
        merged_from := NULL; hit_ratio := NULL; token_count := NULL; reason := NULL;
        IF used + result_tokens[i] <= max_tokens THEN
            used := used + result_tokens[i];
            kept := 'whole';
            RETURN NEXT;
            CONTINUE;
        END IF;
        kept := 'dropped';
        RETURN NEXT;
        CONTINUE WHEN used >= max_tokens OR NOT (i = ANY (hit_owner));
        FOR part IN
            SELECT r.*
              FROM hrag._retrieve_hits(
                       ARRAY(SELECT h.id FROM unnest(hit_ids, hit_owner) WITH ORDINALITY AS h(id, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       ARRAY(SELECT h.doc FROM unnest(hit_docs, hit_owner) WITH ORDINALITY AS h(doc, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       ARRAY(SELECT h.score FROM unnest(hit_scores, hit_owner) WITH ORDINALITY AS h(score, o, at)
                              WHERE h.o = i ORDER BY h.at),
                       max_tokens - used) AS r
             ORDER BY r.rank
        LOOP
            CONTINUE WHEN used + part.token_count > max_tokens;  -- (the best hit alone, over budget)
            used := used + part.token_count;
            step := step + 1;
            kept := 'part';
            node_id := part.node_id;
            document_id := part.document_id;
            title := part.title;
            heading_path := part.heading_path;
            content := part.content;
            merged_from := part.merged_from;
            hit_ratio := part.hit_ratio;
            token_count := part.token_count;
            reason := part.reason;
            RETURN NEXT;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION hrag._fit_budget(uuid[], integer[], uuid[], uuid[], real[], integer[], integer) IS
    'internal: a parent-child or auto-merge context within max_tokens, not part of the API';
