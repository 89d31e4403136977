-- Undo revision 0012: revision 0010's search_hybrid, _retrieve_hits, retrieve
-- and distribute(), and revision 0011's budget steps, verbatim.
-- Current definitions: hrag_pg/sql/search.sql, budget.sql.

DROP FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], integer[], uuid[], uuid[], real[], boolean);
DROP FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean);
DROP FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]);
DROP FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]);

CREATE FUNCTION hrag._budget_candidates_document(doc uuid, node_ids uuid[], scores real[],
                                                 weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE
    chain AS (
        SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.document_id, n.parent_id
          FROM unnest(node_ids, scores, weights) AS w(id, score, weight)
          JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = w.id
        UNION ALL
        SELECT c.hit, c.score, c.weight, p.id, p.document_id, p.parent_id
          FROM chain c
          JOIN hrag.nodes p ON p.document_id = coalesce(doc, c.document_id) AND p.id = c.parent_id
    ),
    cand AS (
        SELECT c.node, c.document_id, sum(c.weight) AS evidence, max(c.score) AS best, count(*) AS hits
          FROM chain c
         GROUP BY c.node, c.document_id
    )
    SELECT cand.node, cand.document_id, cand.evidence, cand.best, cand.hits, n.seq, n.subtree_end,
           n.subtree_tokens, n.child_count, n.depth
      FROM cand
      JOIN hrag.nodes n ON n.document_id = coalesce(doc, cand.document_id) AND n.id = cand.node;
END
$$;

CREATE FUNCTION hrag._budget_candidates_each(node_ids uuid[], document_ids uuid[], scores real[],
                                             weights double precision[])
RETURNS TABLE (node_id uuid, document_id uuid, evidence double precision, best real, hits bigint,
               seq integer, subtree_end integer, subtree_tokens integer, child_count integer, depth integer)
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

CREATE FUNCTION hrag._budget_rows_document(doc uuid, picked_ids uuid[], picked_why text[], node_ids uuid[],
                                           scores real[], over_budget boolean)
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
            SELECT n.id, n.document_id, n.seq, n.subtree_end, pk.why
              FROM unnest(picked_ids, picked_why) AS pk(id, why)
              JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = pk.id
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
                                  WHERE a.parent_id = p.id AND a.document_id = coalesce(doc, p.document_id)
                                    AND hit.seq BETWEEN a.seq AND a.subtree_end) AS child ON true
             GROUP BY p.id
        )
        SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end,
               a.best::real AS best, a.merged_from,
               CASE WHEN n.child_count > 0 THEN (a.children_hit::real / n.child_count)::real END AS hit_ratio,
               n.subtree_tokens,
               CASE WHEN over_budget THEN p.why
                    WHEN p.why = 'hit' THEN 'direct hit'
                    ELSE format('%s of %s children hit, %s hits inside', a.children_hit, n.child_count, a.hits_inside)
               END AS reason
          FROM picked p
          JOIN absorbed a ON a.id = p.id
          JOIN hrag.nodes n ON n.document_id = coalesce(doc, p.document_id) AND n.id = p.id
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

CREATE FUNCTION hrag._budget_rows_each(picked_ids uuid[], picked_docs uuid[], picked_why text[],
                                       node_ids uuid[], document_ids uuid[], scores real[], over_budget boolean)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real,
               token_count integer, reason text)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc   uuid;
    doc_picked uuid[];
    doc_why    text[];
    doc_ids    uuid[];
    doc_scores real[];
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
        SELECT array_agg(p.id ORDER BY p.ord), array_agg(p.why ORDER BY p.ord) INTO doc_picked, doc_why
          FROM unnest(picked_ids, picked_docs, picked_why) WITH ORDINALITY AS p(id, doc, why, ord)
         WHERE p.doc = coalesce(this_doc, p.doc);
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.score ORDER BY h.ord), '{}')
          INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._budget_rows_document(this_doc, doc_picked, doc_why, doc_ids, doc_scores,
                                                              over_budget);
    END LOOP;
END
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
          JOIN hrag.nodes n ON n.document_id = b.document_id AND n.id = b.node_id
         WHERE NOT EXISTS (SELECT 1 FROM vector_hit v WHERE v.node_id = b.node_id)
    ),
    scored AS (
        SELECT p.node_id, p.parent_id, p.document_id, p.vector_score,
               CASE WHEN total > 0
                    THEN coalesce((SELECT sum(w.idf) FROM unnest(terms, idfs) AS w(term, idf)
                                    WHERE w.term = ANY (n.lexical_terms)), 0) / total
                    ELSE 0 END::real AS lexical_score
          FROM pool p
          JOIN hrag.nodes n ON n.document_id = p.document_id AND n.id = p.node_id
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
        SELECT cand.node_id AS node, cand.evidence, cand.best, cand.hits, cand.document_id, cand.seq,
               cand.subtree_end, cand.subtree_tokens, cand.child_count, cand.depth,
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
    END LOOP;

    sel_why := ARRAY(SELECT w FROM unnest(sel_why, alive) WITH ORDINALITY AS x(w, a, i) WHERE a ORDER BY i);
    sel_ids := ARRAY(SELECT v FROM unnest(sel_ids, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);
    sel_docs := ARRAY(SELECT v FROM unnest(sel_doc, alive) WITH ORDINALITY AS x(v, a, i) WHERE a ORDER BY i);

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
    END IF;

    RETURN QUERY
    SELECT r.node_id, r.document_id, r.depth, r.title, r.heading_path, r.content, r.score, r.merged_from,
           r.hit_ratio, (row_number() OVER (ORDER BY r.score DESC, r.depth, r.node_id))::integer,
           r.token_count, r.reason
      FROM hrag._budget_rows_each(sel_ids, sel_docs, sel_why, node_ids, document_ids, scores, over_budget) AS r
     ORDER BY r.score DESC, r.depth, r.node_id;
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
        SELECT s.node_id, s.document_id, s.score
          FROM hrag.search_hybrid(query, query_text, top_k, collection, filter, lexical_weight) AS s
    )
    SELECT r.*
      FROM hrag._retrieve_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                               ARRAY(SELECT h.document_id FROM hits h ORDER BY h.score DESC, h.node_id),
                               ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                               max_tokens) AS r
     ORDER BY r.rank
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
    -- delegated to the worker holding the shard of its document argument.
    FOR spec IN
        SELECT * FROM (VALUES (1, 'hrag.node_text(uuid, uuid)', 'document_id'),
                              (2, 'hrag._node_rows_document(uuid, uuid[])', 'doc'),
                              (3, 'hrag._auto_merge_document(uuid, uuid[], real[], real)', 'doc'),
                              (4, 'hrag._parents_document(uuid, uuid[], bigint[])', 'doc'),
                              (5, 'hrag._budget_candidates_document(uuid, uuid[], real[], double precision[])', 'doc'),
                              (6, 'hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean)', 'doc'))
                       AS s(ord, fn, arg)
         ORDER BY ord
    LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_object
                        WHERE objid = spec.fn::regprocedure
                          AND distribution_argument_index IS NOT NULL AND force_delegation) THEN
            -- force_delegation: also inside transaction blocks (every SQLAlchemy
            -- read is one) and from the coordinator's loops; safe because the
            -- function only reads its document.
            PERFORM create_distributed_function(spec.fn::regprocedure, spec.arg,
                                                colocate_with => 'hrag.nodes', force_delegation => true);
            action := 'distributed';
        ELSE
            action := 'already distributed';
        END IF;
        table_name := spec.fn; distribution := 'by ' || spec.arg || ', colocated with hrag.nodes';
        RETURN NEXT;
    END LOOP;
END
$$;

DO $$
BEGIN
    -- (nested: the inner test names a Citus catalog that only exists with Citus)
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'hrag.nodes'::regclass) THEN
            PERFORM * FROM hrag.distribute();
        END IF;
    END IF;
END
$$;

ALTER FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) ROWS 30;
ALTER FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) ROWS 10;
ALTER FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) ROWS 10;
ALTER FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) ROWS 10;
ALTER FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) ROWS 10;

COMMENT ON FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the budget mode''s candidates on the hits'' paths, not part of the API';
COMMENT ON FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) IS
    'internal: hrag._budget_candidates_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the chosen nodes with what they absorbed, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) IS
    'internal: hrag._budget_rows_document for each document of the chosen nodes on Citus, once for all of them elsewhere, not part of the API';
