-- Downgrade of revision 0023: 0022's hrag.lexical_terms (no identifier terms),
-- verbatim, and the stored terms, their index and the term statistics
-- computed again with it (the same rewrite of hrag.nodes as the upgrade).
-- Current definitions: hrag_pg/sql/lexical.sql.

CREATE OR REPLACE FUNCTION hrag.lexical_terms(input text)
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

COMMENT ON FUNCTION hrag.lexical_terms(text) IS
    'The distinct search terms of a text: English stems without stop words, CJK character bigrams';

-- ---------------------------------------------------------------------------
-- The stored terms and their hashes, computed again with the new function.
-- ---------------------------------------------------------------------------
-- (Through EXECUTE: Citus forwards a propagated DDL command's query string to
-- the workers, and this file is sent as one string of several commands.)
DO $$
BEGIN
    EXECUTE $ddl$
        ALTER TABLE hrag.nodes
            DROP COLUMN lexical_hashes,
            DROP COLUMN lexical_terms,
            ADD COLUMN lexical_terms text[]
                GENERATED ALWAYS AS (CASE WHEN embedding IS NOT NULL
                                          THEN hrag.node_lexical_terms(heading_path, content, metadata)
                                     END) STORED,
            ADD COLUMN lexical_hashes bigint[]
                GENERATED ALWAYS AS (CASE WHEN embedding IS NOT NULL
                                          THEN hrag.term_hashes(hrag.node_lexical_terms(heading_path, content, metadata))
                                     END) STORED
    $ddl$;
    EXECUTE 'CREATE INDEX nodes_lexical_hashes_idx ON hrag.nodes USING gin (lexical_hashes) '
            'WITH (fastupdate = off) WHERE lexical_hashes IS NOT NULL';
END
$$;

-- ---------------------------------------------------------------------------
-- Every document's term statistics, counted again from its new terms.
-- ---------------------------------------------------------------------------
DO $$
DECLARE
    doc uuid;
BEGIN
    FOR doc IN SELECT d.id FROM hrag.documents d ORDER BY d.id LOOP
        PERFORM hrag.refresh_document_terms(doc);
    END LOOP;
END
$$;

-- The rewrite leaves the new columns without planner statistics (the lexical
-- lookup's estimate reads them); autovacuum would gather them only after
-- enough later writes.
ANALYZE hrag.nodes;
