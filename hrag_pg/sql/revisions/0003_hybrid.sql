-- Revision 0003: hybrid scoring (lexical_terms, lexical_score, search_hybrid).
-- The bundled English model gives Japanese nearly uniform similarities, so the
-- vector candidates are rescored by IDF-weighted coverage of the question's terms.
-- Current definitions: hrag_pg/sql/lexical.sql, search.sql;
-- measurements: docs/decisions.md, "Hybrid lexical + vector scoring, and an optional relative score floor".

-- ---------------------------------------------------------------------------
-- hrag.lexical_terms: the distinct search terms of a text.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.lexical_terms(input text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(DISTINCT term), '{}')
      FROM (
            -- English (and other space-separated) words, stemmed, no stop words
            SELECT lexeme AS term
              FROM unnest(tsvector_to_array(to_tsvector('english', coalesce(input, '')))) AS lexeme
             WHERE lexeme !~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]'
            UNION ALL
            -- character bigrams of CJK runs (a lone character stands for itself)
            SELECT substr(run.text, i, 2)
              FROM regexp_matches(coalesce(input, ''),
                                  '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+',
                                  'g') AS m(parts),
                   LATERAL (SELECT m.parts[1] AS text) AS run,
                   generate_series(1, greatest(length(run.text) - 1, 1)) AS i
           ) AS terms
     WHERE term <> ''
       AND term !~ '[\u3040-\u309f]'
$$;

-- ---------------------------------------------------------------------------
-- Each search target's terms, computed once when the row is written (a
-- stored generated column), so a hybrid search only intersects arrays.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.node_lexical_terms(heading_path text[], content text, metadata jsonb)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT hrag.lexical_terms(array_to_string(heading_path, ' ') || ' '
                              || coalesce(metadata->>'question', content))
$$;

ALTER TABLE hrag.nodes
    ADD COLUMN lexical_terms text[]
    GENERATED ALWAYS AS (CASE WHEN embedding IS NOT NULL
                              THEN hrag.node_lexical_terms(heading_path, content, metadata) END) STORED;

-- ---------------------------------------------------------------------------
-- hrag.search_hybrid: the ANN step rescored by lexical overlap.
--
-- Takes the `candidates` (default 3k, at least 30) nearest embedded nodes (filters applied inside the
-- index scan, as in search_leaves), scores each as
--     (1 - lexical_weight) * cosine + lexical_weight * lexical coverage
-- of query_text's terms in the node's heading path and text (the question
-- for QA nodes), and returns the best k.  With min_relative_score, hits
-- scoring below that share of the best hit are dropped, so a narrow question
-- with one clear answer does not drag its weak neighbours into a merge.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.search_hybrid(
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
