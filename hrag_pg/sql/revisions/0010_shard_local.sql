-- Revision 0010: retrieval split into per-document steps (hrag._*_document,
-- every query filtered on document_id, so Citus runs each on one shard) and
-- coordinator steps (candidates, ranking, selection); same results.
-- Current definitions: hrag_pg/sql/text.sql, merge.sql, parent_child.sql, budget.sql;
-- reasoning: docs/decisions.md, "Distributable keys; Citus-only conversions happen in hrag.distribute()"; measurements: docs/scaling.md.

-- ---------------------------------------------------------------------------
-- hrag._term_weights: unchanged result; the document frequencies are one
-- grouped scan instead of a correlated subquery per term (Citus supports no
-- correlated subquery beside a set-returning function).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION hrag._term_weights(terms text[], collection text)
RETURNS TABLE (term text, df bigint, idf real)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH n AS (
        SELECT greatest(coalesce(sum(d.search_targets), 0), 1) AS leaves
          FROM hrag.documents d
         WHERE _term_weights.collection IS NULL OR d.collection = _term_weights.collection
    ),
    present AS (
        SELECT t.term, sum(t.leaves) AS df
          FROM hrag.document_terms t
         WHERE t.term = ANY (terms)
           AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)
         GROUP BY t.term
    ),
    freq AS (
        SELECT q.term, coalesce(p.df, 0) AS df
          FROM unnest(terms) AS q(term)
          LEFT JOIN present p ON p.term = q.term
    )
    SELECT f.term, f.df, ln(1.0 + (n.leaves - f.df + 0.5) / (f.df + 0.5))::real
      FROM freq f, n
     WHERE f.df > 0
     ORDER BY f.df, f.term;
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.search_hybrid: unchanged, but the candidates are joined back to their
-- rows by (document_id, id), the primary key (one shard per row on Citus).
-- ---------------------------------------------------------------------------
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

-- ---------------------------------------------------------------------------
-- hrag._document_ids: the document of each node id (NULL for an unknown
-- id), in array order.  The *_hits functions take bare node ids; this is
-- their one lookup by id (on Citus a query to every shard, by the id index).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._document_ids(node_ids uuid[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    found_ids  uuid[];
    found_docs uuid[];
BEGIN
    SELECT array_agg(n.id), array_agg(n.document_id) INTO found_ids, found_docs
      FROM hrag.nodes n
     WHERE n.id = ANY (node_ids);
    RETURN ARRAY(SELECT (SELECT f.doc FROM unnest(found_ids, found_docs) AS f(id, doc)
                          WHERE f.id = h.id ORDER BY f.doc LIMIT 1)
                   FROM unnest(node_ids) WITH ORDINALITY AS h(id, ord)
                  ORDER BY h.ord);
END
$$;

-- ---------------------------------------------------------------------------
-- hrag._node_rows_document: nodes of one document with their full text.
-- The text is assembled by a statement of its own per node, not inside the
-- lookup: on Citus a function that reads nodes must not run inside a query
-- pushed down to a shard.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._node_rows_document(doc uuid, node_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens, n.child_count
          FROM hrag.nodes n
         WHERE n.document_id = doc AND n.id = ANY (node_ids)
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
        token_count := x.subtree_tokens;
        child_count := x.child_count;
        RETURN NEXT;
    END LOOP;
END
$$;

-- Per document of document_ids, the rows of the nodes node_ids holds there.
CREATE FUNCTION hrag._node_rows_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        doc_ids := ARRAY(SELECT h.id FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
                          WHERE h.doc = this_doc ORDER BY h.ord);
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._node_rows_document(this_doc, doc_ids);
    END LOOP;
END
$$;

-- ---------------------------------------------------------------------------
-- Auto-merging.  hrag._auto_merge_document is revision 0007's
-- auto_merge_hits for the hits of one document (a merge never crosses
-- documents: hits in different documents share no ancestor), every
-- hrag.nodes reference filtered on the document.  The coordinator step
-- ranks the union of the documents' results as before.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._auto_merge_document(
    doc             uuid,
    node_ids        uuid[],
    scores          real[],
    merge_threshold real
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
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
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = hit.id
            UNION ALL
            SELECT c.hit, c.score, p.id, p.parent_id, p.depth, p.child_count, c.steps + 1
              FROM chain c
              JOIN hrag.nodes p ON p.document_id = doc AND p.id = c.parent_id
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
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, r.score, r.merged_from,
               (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top)
                   AS hit_ratio,
               n.subtree_tokens
          FROM result r
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = r.top
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
        score := x.score;
        merged_from := x.merged_from;
        hit_ratio := x.hit_ratio;
        token_count := x.subtree_tokens;
        RETURN NEXT;
    END LOOP;
END
$$;

CREATE FUNCTION hrag._auto_merge_each(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc   uuid;
    doc_ids    uuid[];
    doc_scores real[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord) INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._auto_merge_document(this_doc, doc_ids, doc_scores, merge_threshold);
    END LOOP;
END
$$;

-- The coordinator step: the documents' results in rank order (score, then
-- the larger node, then id), as revision 0007's auto_merge_hits ranked them.
CREATE FUNCTION hrag._auto_merge_ranked(node_ids uuid[], document_ids uuid[], scores real[], merge_threshold real)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    PERFORM hrag._check_threshold(merge_threshold);
    RETURN QUERY
    SELECT m.node_id, m.document_id, m.depth, m.title, m.heading_path, m.content, m.score, m.merged_from,
           m.hit_ratio, (row_number() OVER (ORDER BY m.score DESC, m.depth, m.node_id))::integer, m.token_count
      FROM hrag._auto_merge_each(node_ids, document_ids, scores, merge_threshold) AS m
     ORDER BY m.score DESC, m.depth, m.node_id;
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
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY
    SELECT * FROM hrag._auto_merge_ranked(node_ids, hrag._document_ids(node_ids), scores, merge_threshold);
END
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
        SELECT s.node_id, s.document_id, s.score
          FROM hrag.search_leaves(query, top_k, collection, filter) AS s
    )
    SELECT m.*
      FROM hrag._auto_merge_ranked(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                   ARRAY(SELECT h.document_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                   ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                                   merge_threshold) AS m
     ORDER BY m.rank
$$;

-- ---------------------------------------------------------------------------
-- Parent-child.  hrag._parents_document: each hit of one document (by its
-- position in the hit list) and the parent it expands to -- a "group" is no
-- context of its own: its parent -- with the parent's range.  The selection
-- (first-seen order, no overlap, max_parents) crosses documents and stays
-- in the coordinator step, unchanged; the chosen parents' rows come from
-- hrag._node_rows_each.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._parents_document(doc uuid, node_ids uuid[], ords bigint[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT doc, h.ord, up.id, up.seq, up.subtree_end
      FROM unnest(node_ids, ords) AS h(id, ord)
      JOIN hrag.nodes n ON n.document_id = doc AND n.id = h.id
      JOIN hrag.nodes p ON p.document_id = doc AND p.id = n.parent_id
      JOIN hrag.nodes up ON up.document_id = doc
                        AND up.id = CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END;
END
$$;

CREATE FUNCTION hrag._parents_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
    doc_ords bigint[];
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.ord ORDER BY h.ord) INTO doc_ids, doc_ords
          FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._parents_document(this_doc, doc_ids, doc_ords);
    END LOOP;
END
$$;

-- The coordinator step of parent_child_hits / parent_child (revision 0007's
-- parent_child_hits, with the hits' documents given).
CREATE FUNCTION hrag._parent_child_hits(
    node_ids       uuid[],
    document_ids   uuid[],
    scores         real[],
    max_parents    integer,
    top_k_children integer
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    parent    record;
    hit_ord    bigint[];
    hit_parent uuid[];
    hit_doc    uuid[];
    hit_seq    integer[];
    hit_end    integer[];
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

    -- each hit's parent, per document (unknown ids and roots have none)
    SELECT coalesce(array_agg(m.ord), '{}'), coalesce(array_agg(m.parent_id), '{}'),
           coalesce(array_agg(m.document_id), '{}'), coalesce(array_agg(m.seq), '{}'),
           coalesce(array_agg(m.subtree_end), '{}')
      INTO hit_ord, hit_parent, hit_doc, hit_seq, hit_end
      FROM hrag._parents_each(node_ids, document_ids) AS m;

    FOR parent IN
        SELECT m.parent_id, min(m.ord) AS first_seen, m.document_id, m.seq, m.subtree_end
          FROM unnest(hit_ord, hit_parent, hit_doc, hit_seq, hit_end)
               AS m(ord, parent_id, document_id, seq, subtree_end)
         GROUP BY m.parent_id, m.document_id, m.seq, m.subtree_end
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
        SELECT h.id, h.score, h.ord, m.parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN unnest(hit_ord, hit_parent) AS m(ord, parent_id) ON m.ord = h.ord
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
    SELECT p.node_id, p.document_id, p.title, p.heading_path, p.content,
           picked.best, picked.matched,
           (row_number() OVER (ORDER BY picked.first_seen))::integer,
           p.token_count
      FROM picked
      JOIN hrag._node_rows_each(kept_ids, kept_doc) AS p ON p.node_id = picked.parent_id
     ORDER BY picked.first_seen;
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
BEGIN
    PERFORM hrag._check_hits(node_ids, scores);
    RETURN QUERY
    SELECT * FROM hrag._parent_child_hits(node_ids, hrag._document_ids(node_ids), scores, max_parents,
                                          top_k_children);
END
$$;

-- hrag.parent_child: search_leaves -> the parent-child step, one round trip.
-- The ANN step takes enough children for max_parents distinct parents in
-- all but pathological trees (at least 10 per parent asked for).
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
    docs   uuid[];
    sims   real[];
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');
    -- search_leaves returns each leaf's parent_id: roots (no parent) drop out here
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.document_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO ids, docs, sims
      FROM hrag.search_leaves(query, least(greatest(top_k_children, 10 * max_parents), 1000), collection, filter) AS s
     WHERE s.parent_id IS NOT NULL
       AND (min_score IS NULL OR s.score >= min_score);
    RETURN QUERY SELECT * FROM hrag._parent_child_hits(ids, docs, sims, max_parents, top_k_children);
END
$$;

-- ---------------------------------------------------------------------------
-- The budget mode.  hrag._budget_candidates_document: the ancestor climb of
-- revision 0007's retrieve_hits for the hits of one document (weights
-- computed by the caller over all hits): every node on the hits' paths with
-- its evidence, best score and number of hits below it.
-- hrag._budget_rows_document: the chosen nodes of one document with the
-- hits they absorbed and their text.  The greedy selection across documents
-- stays in the coordinator step, unchanged.
-- ---------------------------------------------------------------------------
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
        SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.parent_id
          FROM unnest(node_ids, scores, weights) AS w(id, score, weight)
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = w.id
        UNION ALL
        SELECT c.hit, c.score, c.weight, p.id, p.parent_id
          FROM chain c
          JOIN hrag.nodes p ON p.document_id = doc AND p.id = c.parent_id
    ),
    cand AS (
        SELECT c.node, sum(c.weight) AS evidence, max(c.score) AS best, count(*) AS hits
          FROM chain c
         GROUP BY c.node
    )
    SELECT cand.node, doc, cand.evidence, cand.best, cand.hits, n.seq, n.subtree_end,
           n.subtree_tokens, n.child_count, n.depth
      FROM cand
      JOIN hrag.nodes n ON n.document_id = doc AND n.id = cand.node;
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
BEGIN
    FOR this_doc IN SELECT DISTINCT h.doc FROM unnest(document_ids) AS h(doc) WHERE h.doc IS NOT NULL LOOP
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.score ORDER BY h.ord), array_agg(h.weight ORDER BY h.ord)
          INTO doc_ids, doc_scores, doc_weights
          FROM unnest(node_ids, document_ids, scores, weights) WITH ORDINALITY AS h(id, doc, score, weight, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
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
            SELECT n.id, n.seq, max(h.score) AS score
              FROM unnest(node_ids, scores) AS h(id, score)
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = h.id
             GROUP BY n.id, n.seq
        ),
        picked AS (
            SELECT n.id, n.seq, n.subtree_end, pk.why
              FROM unnest(picked_ids, picked_why) AS pk(id, why)
              JOIN hrag.nodes n ON n.document_id = doc AND n.id = pk.id
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
              JOIN hit ON hit.seq BETWEEN p.seq AND p.subtree_end
              LEFT JOIN LATERAL (SELECT a.id FROM hrag.nodes a
                                  WHERE a.parent_id = p.id AND a.document_id = doc
                                    AND hit.seq BETWEEN a.seq AND a.subtree_end) AS child ON true
             GROUP BY p.id
        )
        SELECT n.id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end,
               a.best::real AS best, a.merged_from,
               CASE WHEN n.child_count > 0 THEN (a.children_hit::real / n.child_count)::real END AS hit_ratio,
               n.subtree_tokens,
               CASE WHEN over_budget THEN p.why
                    WHEN p.why = 'hit' THEN 'direct hit'
                    ELSE format('%s of %s children hit, %s hits inside', a.children_hit, n.child_count, a.hits_inside)
               END AS reason
          FROM picked p
          JOIN absorbed a ON a.id = p.id
          JOIN hrag.nodes n ON n.document_id = doc AND n.id = p.id
    LOOP
        node_id := x.id;
        document_id := doc;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        -- a statement of its own (see hrag._node_rows_document)
        content := hrag._subtree_text(doc, x.seq, x.subtree_end);
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
BEGIN
    FOR this_doc IN SELECT DISTINCT p.doc FROM unnest(picked_docs) AS p(doc) WHERE p.doc IS NOT NULL LOOP
        SELECT array_agg(p.id ORDER BY p.ord), array_agg(p.why ORDER BY p.ord) INTO doc_picked, doc_why
          FROM unnest(picked_ids, picked_docs, picked_why) WITH ORDINALITY AS p(id, doc, why, ord)
         WHERE p.doc = this_doc;
        SELECT coalesce(array_agg(h.id ORDER BY h.ord), '{}'), coalesce(array_agg(h.score ORDER BY h.ord), '{}')
          INTO doc_ids, doc_scores
          FROM unnest(node_ids, document_ids, scores) WITH ORDINALITY AS h(id, doc, score, ord)
         WHERE h.doc = this_doc;
        -- a statement of its own, so Citus delegates it to the document's worker
        RETURN QUERY SELECT * FROM hrag._budget_rows_document(this_doc, doc_picked, doc_why, doc_ids, doc_scores,
                                                              over_budget);
    END LOOP;
END
$$;
-- The coordinator step of retrieve_hits / retrieve (revision 0007's retrieve_hits
-- with the hits' documents given; the selection is unchanged).
CREATE FUNCTION hrag._retrieve_hits(
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

-- hrag.retrieve: the candidate stage (search_hybrid) -> the budget step, one
-- round trip, with the candidates' document ids.
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

-- ---------------------------------------------------------------------------
-- hrag.node_text(node_id): the node's (document, range) first, then its text
-- by a statement of its own (on Citus the lookup by bare id asks every shard,
-- the text is read from one).  Callers that know the document use
-- hrag.node_text(document_id, node_id).
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION hrag.node_text(node_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    doc       uuid;
    first_seq integer;
    last_seq  integer;
BEGIN
    SELECT n.document_id, n.seq, n.subtree_end INTO doc, first_seq, last_seq
      FROM hrag.nodes n
     WHERE n.id = node_text.node_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    RETURN hrag._subtree_text(doc, first_seq, last_seq);
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.check_integrity: the same checks, in PL/pgSQL, every self-join also on
-- document_id (a node's parent, children and siblings are in its document:
-- the parent foreign key includes document_id), so on Citus each check runs
-- on every shard, for the documents it holds.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION hrag.check_integrity()
RETURNS TABLE (problem text, document_id uuid, node_id uuid, detail text)
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
    -- every leaf below the root is a search target
    SELECT 'leaf_without_embedding', n.document_id, n.id,
           format('%s leaf at depth %s has no embedding: re-ingest its document with --force', n.kind, n.depth)
      FROM hrag.nodes n
     WHERE n.embedding IS NULL
       AND n.depth > 0
       AND NOT EXISTS (SELECT 1 FROM hrag.nodes c WHERE c.document_id = n.document_id AND c.parent_id = n.id);
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.distribute(): also makes the per-document steps distributed functions.
-- ---------------------------------------------------------------------------
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

-- CREATE OR REPLACE resets a function's row estimate: the search and merge
-- functions return tens of rows, not the 1,000 the planner assumes.
ALTER FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) ROWS 30;
ALTER FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) ROWS 4;
ALTER FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) ROWS 4;
ALTER FUNCTION hrag.auto_merge_hits(uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) ROWS 10;
ALTER FUNCTION hrag.retrieve_hits(uuid[], real[], integer) ROWS 10;
ALTER FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) ROWS 10;
ALTER FUNCTION hrag._term_weights(text[], text) ROWS 10;
ALTER FUNCTION hrag._node_rows_document(uuid, uuid[]) ROWS 4;
ALTER FUNCTION hrag._node_rows_each(uuid[], uuid[]) ROWS 4;
ALTER FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag._auto_merge_ranked(uuid[], uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) ROWS 30;
ALTER FUNCTION hrag._parents_each(uuid[], uuid[]) ROWS 30;
ALTER FUNCTION hrag._parent_child_hits(uuid[], uuid[], real[], integer, integer) ROWS 4;
ALTER FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) ROWS 100;
ALTER FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) ROWS 10;
ALTER FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) ROWS 10;
ALTER FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) ROWS 10;

COMMENT ON FUNCTION hrag._document_ids(uuid[]) IS
    'internal: the document of each node id (NULL if unknown), not part of the API';
COMMENT ON FUNCTION hrag._node_rows_document(uuid, uuid[]) IS
    'internal: per document (one shard on Citus), nodes with their full text, not part of the API';
COMMENT ON FUNCTION hrag._node_rows_each(uuid[], uuid[]) IS
    'internal: hrag._node_rows_document for each document of the nodes, not part of the API';
COMMENT ON FUNCTION hrag._auto_merge_document(uuid, uuid[], real[], real) IS
    'internal: per document (one shard on Citus), the recursive auto-merge of one document''s hits, not part of the API';
COMMENT ON FUNCTION hrag._auto_merge_each(uuid[], uuid[], real[], real) IS
    'internal: hrag._auto_merge_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._auto_merge_ranked(uuid[], uuid[], real[], real) IS
    'internal: the auto-merge of hits with their documents, in rank order, not part of the API';
COMMENT ON FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) IS
    'internal: per document (one shard on Citus), the parent each hit expands to, not part of the API';
COMMENT ON FUNCTION hrag._parents_each(uuid[], uuid[]) IS
    'internal: hrag._parents_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._parent_child_hits(uuid[], uuid[], real[], integer, integer) IS
    'internal: parent-child for hits with their documents, not part of the API';
COMMENT ON FUNCTION hrag._budget_candidates_document(uuid, uuid[], real[], double precision[]) IS
    'internal: per document (one shard on Citus), the budget mode''s candidates on the hits'' paths, not part of the API';
COMMENT ON FUNCTION hrag._budget_candidates_each(uuid[], uuid[], real[], double precision[]) IS
    'internal: hrag._budget_candidates_document for each document of the hits, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean) IS
    'internal: per document (one shard on Citus), the chosen nodes with what they absorbed, not part of the API';
COMMENT ON FUNCTION hrag._budget_rows_each(uuid[], uuid[], text[], uuid[], uuid[], real[], boolean) IS
    'internal: hrag._budget_rows_document for each document of the chosen nodes, not part of the API';
COMMENT ON FUNCTION hrag._retrieve_hits(uuid[], uuid[], real[], integer) IS
    'internal: the budget mode for hits with their documents, not part of the API';
