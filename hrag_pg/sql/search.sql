-- hrag-pg, search.sql: the one candidate stage every mode reads its hits from.
--
--   hrag.search_leaves: the nearest leaves by cosine (a filtered, iterative
--     HNSW scan, ef_search from _ef_search); parent_child.sql and merge.sql.
--   hrag.search_hybrid: the vector candidates plus the leaves holding the
--     question's rarest terms (lexical.sql), scored together above the
--     question's background (_question_background); hrag.retrieve
--     (budget.sql) and every mode the Python API runs with a question text.
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag._ef_search (last changed in revision 0019)
-- The HNSW candidate list (hnsw.ef_search) a search for k hits uses: at least
-- k, the session's own setting and the floor hrag.ef_search (100), at most
-- pgvector's 1000.  A filtered scan with a short list misses near neighbours.
CREATE OR REPLACE FUNCTION hrag._ef_search(k integer)
RETURNS integer
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    floor_depth double precision := hrag._setting('hrag.ef_search', 100);
BEGIN
    -- (pgvector accepts 1 to 1000)
    IF floor_depth < 1 OR floor_depth > 1000 OR floor_depth <> trunc(floor_depth) THEN
        RAISE EXCEPTION 'hrag: setting hrag.ef_search must be a whole number between 1 and 1000, got %', floor_depth
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- (hnsw.ef_search exists once pgvector is loaded in this session; 40 is its default)
    RETURN least(greatest(coalesce(nullif(current_setting('hnsw.ef_search', true), '')::integer, 40),
                          k, floor_depth::integer), 1000);
END
$$;
COMMENT ON FUNCTION hrag._ef_search(integer) IS
    'internal: the HNSW search depth for k hits, max(hnsw.ef_search, k, hrag.ef_search (default 100)), not part of the API';

-- hrag.search_leaves (last changed in revision 0019)
-- The k leaves nearest to the query vector (cosine), within a collection and
-- a metadata filter.  The scan is iterative (hnsw.iterative_scan), so a
-- selective filter or row-level security still yields k rows; ef_search is
-- raised for the statement only (set_config(..., true)).
CREATE OR REPLACE FUNCTION hrag.search_leaves(
    query      vector,
    k          integer DEFAULT 20,
    collection text    DEFAULT NULL,
    filter     jsonb   DEFAULT NULL
)
RETURNS TABLE (node_id uuid, parent_id uuid, document_id uuid, score real)
LANGUAGE plpgsql STABLE ROWS 30
SET hnsw.iterative_scan = 'relaxed_order'
AS $$
#variable_conflict use_column
DECLARE
    ids     uuid[];
    parents uuid[];
    docs    uuid[];
    sims    real[];
    depth   integer;
    caller  text;
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    depth := hrag._ef_search(k);
    caller := current_setting('hnsw.ef_search');
    IF caller::integer <> depth THEN
        PERFORM set_config('hnsw.ef_search', depth::text, true);
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
    -- The caller's depth again: a SET LOCAL inside a function lasts to the
    -- end of the transaction (only the SET clause above is undone on return).
    IF caller::integer <> depth THEN
        PERFORM set_config('hnsw.ef_search', caller, true);
    END IF;

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
COMMENT ON FUNCTION hrag.search_leaves(vector, integer, text, jsonb) IS
    'The ANN step: the k embedded nodes nearest the query (cosine), collection and metadata filters inside the HNSW scan';

-- hrag._question_background (new in revision 0029)
-- How close the question is to the searched collections' text on average:
-- its cosine with their mean direction (the mean of the search targets'
-- unit vectors, kept with the collections' sizes; the documents' own sums on
-- Citus).  hrag.search_hybrid reads similarity above it, so a model's own
-- range cancels: MiniLM puts unrelated texts near 0.1, e5 near 0.8, and a
-- model nobody measured wherever it does, with no constant per model.  0
-- for an empty collection.  docs/decisions.md, "Scores above the question's
-- background".
CREATE OR REPLACE FUNCTION hrag._question_background(query vector, collections text[])
RETURNS real
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    directions vector;
    targets    bigint;
BEGIN
    IF hrag._statistics_per_document() THEN
        SELECT sum(d.embedding_sum), sum(d.search_targets) INTO directions, targets
          FROM hrag.documents d
         WHERE (collections IS NULL OR d.collection = ANY (collections)) AND d.embedding_sum IS NOT NULL;
    ELSE
        SELECT sum(s.embedding_sum), sum(s.search_targets) INTO directions, targets
          FROM hrag.collection_sizes s
         WHERE collections IS NULL OR s.collection = ANY (collections);
    END IF;
    IF directions IS NULL OR coalesce(targets, 0) <= 0 OR vector_norm(query) = 0 THEN
        RETURN 0;
    END IF;
    -- (<#> is the negative inner product; the sum over the count is the mean direction)
    RETURN (-(query <#> directions) / (vector_norm(query) * targets))::real;
END
$$;
COMMENT ON FUNCTION hrag._question_background(vector, text[]) IS
    'internal: the question''s mean cosine with the searched collections'' search targets, not part of the API';

-- hrag.search_hybrid (last changed in revision 0029)
-- Vector and lexical candidates, scored (1 - w) * similarity + w * IDF-weighted
-- coverage of the question's terms.  The similarity is the cosine above the
-- question's background (_question_background), as a share of the way from
-- it to 1: 0 for text no closer than the collection's average, whatever the
-- model's range, so every score is in [0, 1] and means the same under every
-- model.  The lexical candidates are the leaves holding its rarest terms,
-- found through the GIN index over the whole collection and capped
-- (rare_cap): beyond the cap they are many rows in no useful order.  A NULL
-- vector with a question text uses the lexical channel alone.
-- docs/decisions.md, "One candidate stage ..." and "Scores above the
-- question's background".
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
    background real := 0;
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
    IF query IS NOT NULL THEN
        background := least(hrag._question_background(
                                query, CASE WHEN collection IS NULL THEN NULL ELSE ARRAY[collection] END), 0.99);
    END IF;

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
        SELECT p.*, ((1 - weight) * coalesce(greatest(p.vector_score - background, 0) / (1 - background), 0)
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
