-- Revision 0023: identifiers joined by underscores (wait_for) are lexical
-- terms too, since the English parser split them into common words.  The
-- stored terms are rebuilt (a rewrite of hrag.nodes and its indexes, the HNSW
-- one too) and every document's statistics counted again.
-- Current definitions: hrag_pg/sql/lexical.sql;
-- measurements: docs/decisions.md, "Identifiers joined by underscores are terms".

-- ---------------------------------------------------------------------------
-- hrag.lexical_terms: words, CJK bigrams, and now underscore identifiers.
-- ---------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION hrag.lexical_terms(input text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    WITH word AS (
        SELECT lexeme FROM unnest(tsvector_to_array(to_tsvector('english', coalesce(input, '')))) AS lexeme
    )
    SELECT coalesce(array_agg(DISTINCT term), '{}')
      FROM (
            -- English (and other space-separated) words, stemmed, no stop words
            SELECT w.lexeme AS term
              FROM word w
             WHERE w.lexeme !~ '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]'
            UNION ALL
            -- character bigrams of CJK runs (a lone character stands for itself)
            SELECT substr(run.text, i, 2)
              FROM regexp_matches(coalesce(input, ''),
                                  '[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+',
                                  'g') AS m(parts),
                   LATERAL (SELECT m.parts[1] AS text) AS run,
                   generate_series(1, greatest(length(run.text) - 1, 1)) AS i
            UNION ALL
            -- identifiers joined by underscores, whole (the parser splits them
            -- into words): wait_for, shared_buffers, ERR_STREAM_PREMATURE_CLOSE;
            -- not one the parser kept inside a longer term (child_process.exec)
            SELECT ident.name
              FROM (SELECT DISTINCT lower(m.parts[1]) AS name
                      FROM regexp_matches(coalesce(input, ''), '([A-Za-z0-9]+(?:_+[A-Za-z0-9]+)+)', 'g')
                           AS m(parts)) AS ident
             WHERE NOT EXISTS (SELECT 1 FROM word w WHERE strpos(w.lexeme, ident.name) > 0)
           ) AS terms
     WHERE term <> ''
       AND term !~ '[\u3040-\u309f]'
$$;

COMMENT ON FUNCTION hrag.lexical_terms(text) IS
    'The distinct search terms of a text: English stems without stop words, CJK character bigrams, identifiers joined by underscores';

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
