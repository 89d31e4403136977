-- hrag-pg revision 0029, downgrade: the hand-set per-model baseline again
-- (0.65 for E5-style models, which have prompts), no sums of directions, and
-- the previous definitions of the functions 0029 changed.

-- (vector_baseline goes back in its place, before recorded_at and next_model,
-- which are moved behind it with their data.  Through EXECUTE: Citus forwards
-- a propagated DDL command's query string to the workers, and this file is
-- sent as one string of several commands.  Each constraint is added by its own
-- command under the name PostgreSQL gave it at creation: Citus refuses a
-- column added together with an unnamed one.)
DO $$
BEGIN
    EXECUTE 'ALTER TABLE hrag.collection_models ADD COLUMN vector_baseline real NOT NULL DEFAULT 0';
    EXECUTE 'ALTER TABLE hrag.collection_models ADD CONSTRAINT collection_models_vector_baseline_check '
            'CHECK (vector_baseline >= 0 AND vector_baseline < 1)';
    UPDATE hrag.collection_models SET vector_baseline = 0.65 WHERE query_prompt <> '' OR passage_prompt <> '';
    EXECUTE 'ALTER TABLE hrag.collection_models RENAME COLUMN recorded_at TO recorded_at_0029';
    EXECUTE 'ALTER TABLE hrag.collection_models RENAME COLUMN next_model TO next_model_0029';
    EXECUTE 'ALTER TABLE hrag.collection_models DROP CONSTRAINT collection_models_next_model_check';
    -- (on PostgreSQL 18 NOT NULL is a constraint with a name the new column must take)
    EXECUTE 'ALTER TABLE hrag.collection_models ALTER COLUMN recorded_at_0029 DROP NOT NULL';
    EXECUTE 'ALTER TABLE hrag.collection_models ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now()';
    EXECUTE 'ALTER TABLE hrag.collection_models ADD COLUMN next_model jsonb';
    EXECUTE 'ALTER TABLE hrag.collection_models ADD CONSTRAINT collection_models_next_model_check '
            'CHECK (next_model IS NULL OR jsonb_typeof(next_model) = ''object'')';
    UPDATE hrag.collection_models SET recorded_at = recorded_at_0029, next_model = next_model_0029;
    EXECUTE 'ALTER TABLE hrag.collection_models DROP COLUMN recorded_at_0029, DROP COLUMN next_model_0029';
END
$$;
DROP FUNCTION hrag._question_background(vector, text[]);

-- lexical.sql as it was: hrag.refresh_document_terms, hrag._add_collection_sizes, hrag._documents_changed, hrag._keep_collection_statistics

-- hrag.refresh_document_terms (last changed in revision 0021)
-- A document's term counts after ingestion wrote its nodes, in the same
-- transaction: writers of different documents never touch the same rows.
CREATE OR REPLACE FUNCTION hrag.refresh_document_terms(document_id uuid)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    doc_collection text;
    fresh_terms    text[];
    fresh_leaves   integer[];
BEGIN
    -- The document's counts as its rows say now.  Only what differs from the
    -- stored ones is written, so an edit of one paragraph writes a few rows and
    -- the statistics' triggers fold only their terms.
    SELECT coalesce(array_agg(f.term ORDER BY f.term), '{}'), coalesce(array_agg(f.leaves ORDER BY f.term), '{}')
      INTO fresh_terms, fresh_leaves
      FROM (SELECT term.value AS term, count(*)::integer AS leaves
              FROM hrag.nodes n
             CROSS JOIN LATERAL unnest(n.lexical_terms) AS term(value)
             WHERE n.document_id = refresh_document_terms.document_id
               AND n.lexical_terms IS NOT NULL
             GROUP BY term.value) AS f;
    SELECT d.collection INTO doc_collection FROM hrag.documents d WHERE d.id = refresh_document_terms.document_id;

    DELETE FROM hrag.document_terms t
     WHERE t.document_id = refresh_document_terms.document_id
       AND NOT EXISTS (SELECT 1 FROM unnest(fresh_terms) AS f(term) WHERE f.term = t.term);
    UPDATE hrag.document_terms t
       SET leaves = f.leaves
      FROM unnest(fresh_terms, fresh_leaves) AS f(term, leaves)
     WHERE t.document_id = refresh_document_terms.document_id
       AND t.term = f.term
       AND t.leaves <> f.leaves;
    INSERT INTO hrag.document_terms (document_id, collection, term, leaves)
    SELECT refresh_document_terms.document_id, doc_collection, f.term, f.leaves
      FROM unnest(fresh_terms, fresh_leaves) AS f(term, leaves)
     WHERE NOT EXISTS (SELECT 1 FROM hrag.document_terms t
                        WHERE t.document_id = refresh_document_terms.document_id AND t.term = f.term);

    UPDATE hrag.documents d
       SET search_targets = c.targets, total_tokens = c.tokens
      FROM (SELECT (SELECT count(*) FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id AND n.embedding IS NOT NULL)::integer
                       AS targets,
                   (SELECT coalesce(sum(n.subtree_tokens), 0) FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id AND n.parent_id IS NULL)::integer
                       AS tokens) AS c
     WHERE d.id = refresh_document_terms.document_id
       AND (d.search_targets, d.total_tokens) IS DISTINCT FROM (c.targets, c.tokens);
END
$$;
COMMENT ON FUNCTION hrag.refresh_document_terms(uuid) IS
    'Rewrite one document''s lexical statistics from its rows (ingestion calls it in the document''s transaction)';

-- hrag._add_collection_sizes (last changed in revision 0021)
-- The same fold for the collections' sizes (search targets, stored tokens).
CREATE OR REPLACE FUNCTION hrag._add_collection_sizes(collections text[], targets bigint[], tokens bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    BEGIN
        WITH change AS (
            SELECT c.collection, sum(c.targets) AS targets, sum(c.tokens) AS tokens
              FROM unnest(collections, targets, tokens) AS c(collection, targets, tokens)
             GROUP BY c.collection
        ),
        folded AS (
            DELETE FROM hrag.collection_sizes s
             WHERE s.ctid = ANY (ARRAY(
                       SELECT f.ctid FROM hrag.collection_sizes f
                        WHERE f.collection IN (SELECT c.collection FROM change c)
                          FOR UPDATE SKIP LOCKED))
            RETURNING s.collection, s.search_targets, s.total_tokens
        )
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
        SELECT x.collection, sum(x.targets), sum(x.tokens)
          FROM (SELECT * FROM change UNION ALL SELECT * FROM folded) AS x
         GROUP BY x.collection
        HAVING sum(x.targets) <> 0 OR sum(x.tokens) <> 0;
    EXCEPTION WHEN serialization_failure THEN
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
        SELECT c.collection, sum(c.targets), sum(c.tokens)
          FROM unnest(collections, targets, tokens) AS c(collection, targets, tokens)
         GROUP BY c.collection
        HAVING sum(c.targets) <> 0 OR sum(c.tokens) <> 0;
    END;
END
$$;
COMMENT ON FUNCTION hrag._add_collection_sizes(text[], bigint[], bigint[]) IS
    'internal: add signed changes to hrag.collection_sizes, folding the changed collections'' free rows, not part of the API';

-- hrag._documents_changed (last changed in revision 0021)
-- The same for hrag.documents: the change in the collections' sizes.
CREATE OR REPLACE FUNCTION hrag._documents_changed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    c  text[];
    n  bigint[];
    tk bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hrag.collection_sizes;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.collection), array_agg(r.search_targets::bigint), array_agg(r.total_tokens::bigint)
          INTO c, n, tk
          FROM new_rows r WHERE r.search_targets <> 0 OR r.total_tokens <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.collection), array_agg(-r.search_targets::bigint), array_agg(-r.total_tokens::bigint)
          INTO c, n, tk
          FROM old_rows r WHERE r.search_targets <> 0 OR r.total_tokens <> 0;
    ELSE
        -- (most updates of a document change neither count: nothing to add)
        SELECT array_agg(r.collection), array_agg(r.targets), array_agg(r.tokens) INTO c, n, tk
          FROM (SELECT x.collection, sum(x.targets) AS targets, sum(x.tokens) AS tokens
                  FROM (SELECT y.collection, y.search_targets::bigint AS targets, y.total_tokens::bigint AS tokens
                          FROM new_rows y
                        UNION ALL
                        SELECT y.collection, -y.search_targets::bigint, -y.total_tokens::bigint FROM old_rows y) AS x
                 GROUP BY x.collection
                HAVING sum(x.targets) <> 0 OR sum(x.tokens) <> 0) AS r;
    END IF;
    IF c IS NOT NULL THEN
        PERFORM hrag._add_collection_sizes(c, n, tk);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hrag._documents_changed() IS
    'internal: the trigger keeping hrag.collection_sizes, not part of the API';

-- hrag._keep_collection_statistics (last changed in revision 0021)
-- Rebuilds the per-collection sums from hrag.document_terms and
-- hrag.documents and (re)creates their triggers (repair_integrity).  Writers
-- are held off by a table lock: deleting rows a writer is folding would
-- count them twice.  Nothing on Citus, where the sums are not kept.
CREATE OR REPLACE FUNCTION hrag._keep_collection_statistics()
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF hrag._statistics_per_document() THEN
        RETURN;
    END IF;
    PERFORM hrag._drop_statistics_triggers();
    -- no writer may change the documents between the counting and the triggers
    LOCK TABLE hrag.documents, hrag.document_terms IN SHARE MODE;
    DELETE FROM hrag.collection_terms;
    DELETE FROM hrag.collection_sizes;
    INSERT INTO hrag.collection_terms (collection, term, leaves)
    SELECT t.collection, t.term, sum(t.leaves) FROM hrag.document_terms t GROUP BY t.collection, t.term;
    INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens)
    SELECT d.collection, sum(d.search_targets), sum(d.total_tokens) FROM hrag.documents d GROUP BY d.collection;
    CREATE TRIGGER document_terms_inserted AFTER INSERT ON hrag.document_terms
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_deleted AFTER DELETE ON hrag.document_terms
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_updated AFTER UPDATE ON hrag.document_terms
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER document_terms_truncated AFTER TRUNCATE ON hrag.document_terms
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._document_terms_changed();
    CREATE TRIGGER documents_inserted AFTER INSERT ON hrag.documents
        REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_deleted AFTER DELETE ON hrag.documents
        REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_updated AFTER UPDATE ON hrag.documents
        REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
    CREATE TRIGGER documents_truncated AFTER TRUNCATE ON hrag.documents
        FOR EACH STATEMENT EXECUTE FUNCTION hrag._documents_changed();
END
$$;
COMMENT ON FUNCTION hrag._keep_collection_statistics() IS
    'internal: count the collections'' statistics afresh and (re)create the triggers that keep them (not on Citus), not part of the API';

-- search.sql as it was: hrag.search_hybrid

-- hrag.search_hybrid (last changed in revision 0026)
-- Vector and lexical candidates, scored (1 - w) * cosine + w * IDF-weighted
-- coverage of the question's terms.  The lexical candidates are the leaves
-- holding its rarest terms, found through the GIN index over the whole
-- collection and capped (rare_cap): beyond the cap they are many rows in no
-- useful order.  The cosine reads 0 below the collection model's baseline,
-- so every score is in [0, 1]; a NULL vector with a question text uses the
-- lexical channel alone.  docs/decisions.md, "One candidate stage ...".
CREATE OR REPLACE FUNCTION hrag.search_hybrid(query public.vector, query_text text, k integer DEFAULT 20, collection text DEFAULT NULL::text, filter jsonb DEFAULT NULL::jsonb, lexical_weight real DEFAULT 0.3, candidates integer DEFAULT NULL::integer, min_relative_score real DEFAULT NULL::real) RETURNS TABLE(node_id uuid, parent_id uuid, document_id uuid, score real, vector_score real, lexical_score real)
    LANGUAGE plpgsql STABLE ROWS 30
    AS $$
#variable_conflict use_column
DECLARE
    -- The lexical candidates are the leaves holding the question's rarest
    -- terms, as long as those terms are in at most this many leaves together.
    rare_cap   constant integer := 300;
    idfs       real[] := '{}';
    total      real := 0;
    hashes     bigint[] := '{}';
    rare       bigint[] := '{}';
    rare_df    bigint := 0;
    weight     real;
    term_row   record;
    baseline   real := 0;
BEGIN
    IF query IS NOT NULL OR query_text IS NULL THEN
        PERFORM hrag._check_query(query, filter);
    ELSE
        -- A question without its vector (from psql, say): the lexical channel
        -- alone ranks the leaves by the question's terms.
        IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
            RAISE EXCEPTION 'hrag: argument "filter" must be a JSON object, got a JSON %', jsonb_typeof(filter)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        RAISE NOTICE 'hrag: no query vector: the leaves are ranked by the question''s terms alone (the lexical channel); pass the question''s embedding for semantic search';
    END IF;
    PERFORM hrag._check_count(k, 'k');
    IF candidates IS NOT NULL THEN
        PERFORM hrag._check_count(candidates, 'candidates');
    END IF;
    candidates := greatest(coalesce(candidates, k), 30);
    IF lexical_weight IS NULL OR lexical_weight < 0 OR lexical_weight > 1 OR lexical_weight = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "lexical_weight" must be in [0, 1], got %', coalesce(lexical_weight::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF min_relative_score IS NOT NULL AND (min_relative_score <= 0 OR min_relative_score > 1) THEN
        RAISE EXCEPTION 'hrag: argument "min_relative_score" must be in (0, 1], got %', min_relative_score
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF lexical_weight > 0 OR query IS NULL THEN
        -- rarest first: a term joins the rare set while the set stays within rare_cap leaves
        FOR term_row IN SELECT * FROM hrag._term_weights(hrag.lexical_terms(query_text), collection) LOOP
            hashes := hashes || hrag.term_hash(term_row.term);
            idfs := idfs || term_row.idf;
            total := total + term_row.idf;
            IF rare_df + term_row.df <= rare_cap THEN
                rare := rare || hashes[cardinality(hashes)];
                rare_df := rare_df + term_row.df;
            END IF;
        END LOOP;
    END IF;
    IF query IS NULL AND cardinality(rare) = 0 AND cardinality(hashes) > 0 THEN
        rare := hashes[1:1];  -- only common terms: the rarest still finds leaves, rare_cap of them
    END IF;
    weight := CASE WHEN query IS NULL THEN 1 WHEN total > 0 THEN lexical_weight ELSE 0 END;
    -- Where similarity starts to mean something under the collection's
    -- model (hrag.collection_models.vector_baseline): E5-style models put
    -- unrelated texts near 0.8 (their baseline is 0.65), MiniLM near 0.1
    -- (its baseline is 0).  The fusion reads the similarity above it,
    -- rescaled to [0, 1], so one lexical weight and one budget-mode
    -- sharpness serve models whose cosines live on different scales.  Below
    -- the baseline it reads 0, so every score is in [0, 1].
    SELECT coalesce(max(m.vector_baseline), 0) INTO baseline
      FROM hrag.collection_models m
     WHERE search_hybrid.collection IS NULL OR m.collection = search_hybrid.collection;

    RETURN QUERY
    WITH vector_hit AS (
        SELECT s.node_id, s.parent_id, s.document_id, s.score AS vector_score
          FROM hrag.search_leaves(query, candidates, collection, filter) AS s
         WHERE query IS NOT NULL
    ),
    -- Leaves holding a rare term, through the GIN index (at most rare_cap rows).
    lexical_hit AS (
        SELECT n.id AS node_id, n.parent_id, n.document_id, n.lexical_hashes
          FROM hrag.nodes n
         WHERE cardinality(rare) > 0
           AND n.lexical_hashes && rare
           AND n.lexical_hashes IS NOT NULL
           -- (not `n.embedding IS NOT NULL`: that matches the collection index's
           -- predicate, and a generic plan then ANDs in a scan of that whole index)
           AND coalesce(n.embedding IS NOT NULL, false)
           AND (search_hybrid.collection IS NULL OR n.collection = search_hybrid.collection)
           AND (search_hybrid.filter IS NULL
                OR n.metadata @> search_hybrid.filter
                OR EXISTS (SELECT 1 FROM hrag.documents d
                            WHERE d.id = n.document_id
                              AND (d.metadata || n.metadata) @> search_hybrid.filter))
         LIMIT rare_cap
    ),
    -- Their coverage of the question's terms (IDF-weighted), compared as
    -- hashes: integers compare at a fraction of the cost of text.
    lexical_scored AS (
        SELECT l.node_id, l.parent_id, l.document_id,
               ((SELECT sum(w.idf) FROM unnest(hashes, idfs) AS w(hash, idf) WHERE w.hash = ANY (l.lexical_hashes))
                / total)::real AS lexical_score
          FROM lexical_hit l
    ),
    lexical_best AS (
        SELECT b.* FROM lexical_scored b ORDER BY b.lexical_score DESC, b.node_id LIMIT candidates
    ),
    -- The vector candidates' coverage, scored here rather than looked up
    -- among the lexical rows (a nested loop over all of them per candidate).
    vector_scored AS (
        SELECT v.node_id, v.parent_id, v.document_id, v.vector_score,
               (CASE WHEN total > 0
                     THEN coalesce((SELECT sum(w.idf) FROM unnest(hashes, idfs) AS w(hash, idf)
                                     WHERE w.hash = ANY (n.lexical_hashes)), 0) / total
                     ELSE 0 END)::real AS lexical_score
          FROM vector_hit v
          JOIN hrag.nodes n ON n.document_id = v.document_id AND n.id = v.node_id
    ),
    pool AS (
        SELECT * FROM vector_scored
        UNION ALL
        SELECT b.node_id, b.parent_id, b.document_id, (1 - (n.embedding <=> query))::real, b.lexical_score
          FROM lexical_best b
          JOIN hrag.nodes n ON n.document_id = b.document_id AND n.id = b.node_id
         WHERE NOT EXISTS (SELECT 1 FROM vector_hit v WHERE v.node_id = b.node_id)
    ),
    ranked AS (
        SELECT p.*, ((1 - weight) * coalesce(greatest(p.vector_score - baseline, 0) / (1 - baseline), 0)
                     + weight * p.lexical_score)::real AS combined
          FROM pool p
         ORDER BY combined DESC, p.node_id
         LIMIT k
    )
    SELECT r.node_id, r.parent_id, r.document_id, r.combined, r.vector_score, r.lexical_score
      FROM ranked r
     WHERE min_relative_score IS NULL
        OR r.combined >= min_relative_score * (SELECT max(b.combined) FROM ranked b)
     ORDER BY r.combined DESC, r.node_id;
END
$$;
COMMENT ON FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) IS
    'The candidate stage: ANN candidates plus lexical candidates from the whole collection, fused (cosine and IDF-weighted term coverage)';

-- budget.sql as it was: hrag._retrieve_hits

-- hrag._retrieve_hits (last changed in revision 0026)
-- The choice.  Every node on a hit's path to its root is a candidate, valued
-- by the evidence under it (hit weights exp((score - best) / sharpness)) per
-- tokens^size_exponent, so a section most of whose children are hit can
-- outrank its best leaf; a candidate whose share of the evidence is less
-- than min_lift times its share of the searched text is no better than chance
-- and is left out, so a small collection is not merged into whole documents.
-- Candidates are taken greedily, a node replacing the taken nodes inside it;
-- the best hits keep room in the budget, and a passage is taken only while
-- what it adds is worth its tokens: the budget is a ceiling, not a target.
-- The constants are hrag.auto_* settings; docs/decisions.md, "Budget mode: ..."
-- (four sections), says why each rule and value.
CREATE OR REPLACE FUNCTION hrag._retrieve_hits(node_ids uuid[], document_ids uuid[], scores real[], max_tokens integer) RETURNS TABLE(node_id uuid, document_id uuid, depth integer, title text, heading_path text[], content text, score real, merged_from uuid[], hit_ratio real, rank integer, token_count integer, reason text)
    LANGUAGE plpgsql STABLE ROWS 10
    AS $$
#variable_conflict use_column
DECLARE
    sharpness     double precision := hrag._setting('hrag.auto_sharpness', 0.1);
    size_exponent double precision := hrag._setting('hrag.auto_size_exponent', 0.5);
    min_lift      double precision := hrag._setting('hrag.auto_min_lift', 2.0);
    -- a node holding two or more hits that cover at least this share of its
    -- tokens keeps its whole value when it replaces taken nodes (a merge);
    -- otherwise it is worth what it adds
    merge_share   double precision := hrag._setting('hrag.auto_merge_share', 0.25);
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
    scope_tokens  double precision;
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
    c_hit_share   double precision[];
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

    -- The size of what was searched: the stored tokens of the hits' collections.
    SELECT greatest(s.total_tokens, 1) INTO scope_tokens
      FROM hrag._collection_size(ARRAY(SELECT DISTINCT h.collection FROM hrag.documents h
                                        WHERE h.id = ANY (document_ids))) AS s;

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
    SELECT array_agg(w.id), array_agg(w.score), array_agg(w.weight), (SELECT sum(w.weight) FROM weighted w),
           max(w.score)
      INTO hit_ids, hit_scores, hit_weights, total_weight, best_score
      FROM weighted w;
    hit_docs := ARRAY(SELECT (SELECT d.doc FROM unnest(node_ids, document_ids) AS d(id, doc)
                               WHERE d.id = h.id AND d.doc IS NOT NULL LIMIT 1)
                        FROM unnest(hit_ids) WITH ORDINALITY AS h(id, ord)
                       ORDER BY h.ord);

    -- The candidates worth taking at all, best priority first.
    WITH cands AS MATERIALIZED (
        SELECT * FROM hrag._budget_candidates_each(hit_ids, hit_docs, hit_scores, hit_weights)
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
           -- the share of the node's tokens its hits cover (0 for one hit: a
           -- node around a single hit adds no evidence, only tokens)
           array_agg(CASE WHEN x.hits >= 2 THEN least(x.hit_tokens / greatest(x.subtree_tokens, 1), 1) ELSE 0 END
                     ORDER BY x.priority DESC, x.best DESC, x.depth DESC, x.node_id)
      INTO c_node, c_doc, c_evidence, c_seq, c_end, c_tokens, c_priority, c_single_hit, c_children, c_hit_share
      FROM (SELECT cand.*,
                   -- the tokens of the hits inside (each hit is a candidate of its own)
                   (SELECT sum(h.subtree_tokens)::double precision
                      FROM cands h
                     WHERE h.node_id = ANY (hit_ids) AND h.document_id = cand.document_id
                       AND h.seq BETWEEN cand.seq AND cand.subtree_end) AS hit_tokens,
                   cand.evidence / power(greatest(cand.subtree_tokens, 1), size_exponent) AS priority,
                   -- share of the evidence over share of the searched text: 1 = no better than chance
                   (cand.evidence / total_weight) / (greatest(cand.subtree_tokens, 1) / scope_tokens) AS lift
              FROM cands AS cand) AS x
     WHERE x.lift >= min_lift
       AND x.subtree_tokens <= max_tokens
       AND (x.subtree_tokens >= min_tokens OR x.best >= best_score);

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
        IF below_any AND c_hit_share[j] < merge_share THEN
            added := (c_evidence[j] - below_evidence) / power(greatest(cur_tokens - below_tokens, 1), size_exponent);
            IF added < priority THEN
                aside_at := aside_at || j;
                aside_priority := aside_priority || added;
                CONTINUE;
            END IF;
        END IF;
        IF first_priority IS NOT NULL THEN
            -- a merge brings its whole evidence; any other node what it adds
            node_value := CASE WHEN below_any AND c_hit_share[j] >= merge_share THEN c_evidence[j]
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

    RETURN QUERY
    SELECT r.node_id, r.document_id, r.depth, r.title, r.heading_path, r.content, r.score, r.merged_from,
           r.hit_ratio, (row_number() OVER (ORDER BY r.score DESC, r.depth, r.node_id))::integer,
           r.token_count, r.reason
      FROM hrag._budget_rows_each(sel_ids, sel_docs, sel_why, sel_children, node_ids, document_ids, scores,
                                  over_budget) AS r
     ORDER BY r.score DESC, r.depth, r.node_id;
END
$$;
COMMENT ON FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) IS
    'internal: the budget mode for hits with their documents, not part of the API';

-- integrity.sql as it was: hrag.check_integrity

-- hrag.check_integrity (last changed in revision 0022)
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

-- reembed.sql as it was: hrag.finish_reembed

-- hrag.finish_reembed (last changed in revision 0025)
-- The switch: the prepared vectors replace the old ones for a whole
-- collection at once, or nothing changes, so a search never mixes two
-- models' vectors.  A document written since its vectors were made is
-- refused (they would be of its old text); the collection's model row
-- takes the new model and its baseline.
CREATE OR REPLACE FUNCTION hrag.finish_reembed(collection text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    target   jsonb;
    stale    bigint;
    switched bigint;
BEGIN
    -- Writers read this row FOR SHARE in their transaction: taking it FOR
    -- UPDATE waits for them, and makes those after us see the new model.
    SELECT m.next_model INTO target
      FROM hrag.collection_models m WHERE m.collection = finish_reembed.collection FOR UPDATE;
    IF target IS NULL THEN
        RAISE EXCEPTION 'hrag: collection % has no unfinished reembed to finish', finish_reembed.collection
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT count(*) INTO stale
      FROM hrag.documents d
      LEFT JOIN hrag.reembed_documents r ON r.document_id = d.id
     WHERE d.collection = finish_reembed.collection
       AND (r.document_id IS NULL OR r.document_hash <> d.content_hash
            OR r.fingerprint <> target->>'fingerprint');
    IF stale > 0 THEN
        -- (the caller prepares them and calls again)
        RAISE EXCEPTION 'hrag: % documents of collection % were written since their new vectors were made',
                        stale, finish_reembed.collection
            USING ERRCODE = 'serialization_failure';
    END IF;
    UPDATE hrag.nodes n
       SET embedding = p.embedding, token_count = p.token_count, subtree_tokens = p.subtree_tokens,
           content_hash = p.content_hash
      FROM hrag.reembed_nodes p
     WHERE p.document_id = n.document_id AND p.node_id = n.id AND n.collection = finish_reembed.collection;
    GET DIAGNOSTICS switched = ROW_COUNT;
    UPDATE hrag.documents d
       SET total_tokens = r.total_tokens, content_hash = r.new_document_hash, updated_at = now()
      FROM hrag.reembed_documents r
     WHERE r.document_id = d.id AND d.collection = finish_reembed.collection;
    UPDATE hrag.collection_models m
       SET model = target->>'model', dimension = (target->>'dimension')::integer,
           fingerprint = target->>'fingerprint', query_prompt = target->>'query_prompt',
           passage_prompt = target->>'passage_prompt',
           vector_baseline = coalesce((target->>'vector_baseline')::real, 0), recorded_at = now(), next_model = NULL
     WHERE m.collection = finish_reembed.collection;
    DELETE FROM hrag.reembed_documents r WHERE r.collection = finish_reembed.collection;
    RETURN switched;
END
$$;
COMMENT ON FUNCTION hrag.finish_reembed(text) IS
    'Swap in the vectors an unfinished reembed prepared, for the whole collection in one transaction (hrag reembed calls it)';

DO $$
BEGIN
    EXECUTE 'ALTER TABLE hrag.documents DROP COLUMN embedding_sum';
    EXECUTE 'ALTER TABLE hrag.collection_sizes DROP COLUMN embedding_sum';
END
$$;
COMMENT ON TABLE hrag.collection_sizes IS
    'Per collection, its search targets (the N of the lexical IDF) and stored tokens: the sums of its rows, kept from hrag.documents by its triggers';
