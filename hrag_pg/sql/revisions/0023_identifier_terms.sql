-- hrag-pg revision 0023: identifiers joined by underscores are search terms.
--
-- Why: the lexical channel exists for questions that name something exactly
-- (an option, an error code, a setting, a function).  Its terms come from
-- PostgreSQL's English parser, which reads an underscore as a space and drops
-- stop words: `wait_for` is the term `wait`, `shared_buffers` is `share` and
-- `buffer`, `ERR_STREAM_PREMATURE_CLOSE` is four common words.  So a question
-- that names `asyncio.wait_for` scored every leaf about waiting alike; on
-- Python's own asyncio sources the budget mode returned `wait`, `shield` and
-- two other modules, never the function the question named.  Hyphenated names
-- (`--track-origins`), numbers (`40001`) and camelCase (`setTimeout`) were
-- already whole terms.
--
-- hrag.lexical_terms now adds each run of ASCII letters and digits joined by
-- underscores, lowercased, as one more term (`wait_for`, `run_once` from
-- `_run_once`, `node_extra_ca_certs`), beside the words the parser makes of
-- it, unless the parser already kept the name inside a longer term: it reads
-- `child_process.exec` as one host-name-like term, and counting
-- `child_process` once more outweighed a question's other terms (on the
-- Node.js documentation it cost one question its evidence at 1,000 tokens).
-- A text's terms are a superset of what they were, so a question with no
-- such identifier scores every leaf exactly as before; one that names an
-- identifier now counts its (rare, so heavy) term too.
--
-- The stored terms are generated columns, which PostgreSQL does not recompute
-- when a function they call changes.  So this revision rebuilds both columns
-- (PostgreSQL 16 has no ALTER COLUMN ... SET EXPRESSION): one rewrite of
-- hrag.nodes and of every index on it, the HNSW index too, under an exclusive
-- lock (17.7 s in all for the PostgreSQL manual's 40,645 nodes on a 2-core
-- machine).  An HNSW index built again is another graph, so approximate
-- searches can return slightly other rows afterwards (on the Python library
-- corpus, 0.962 of the 30 nearest agreed with an exact search after one
-- build, 0.997 after another of the same rows); a large install may give the
-- build more memory: PGOPTIONS='-c maintenance_work_mem=2GB' hrag migrate.
-- It then counts every document's term statistics again with
-- hrag.refresh_document_terms, the function ingestion uses (its triggers fold
-- the change into the collections' rows), and analyzes hrag.nodes.
-- The two columns move to the end of the table's column list; hrag writes
-- rows by column name.  On Citus the ALTER TABLE is propagated to the shards.

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
