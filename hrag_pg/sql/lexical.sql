-- hrag-pg, lexical.sql: the lexical channel of search_hybrid (search.sql).
--
--   lexical_terms -> node_lexical_terms, term_hash(es): the terms and hashes
--     hrag.nodes stores as generated columns (applied before tables.sql)
--   refresh_document_terms: a document's term counts (hrag.document_terms),
--     rewritten in the document's own transaction
--   _document_terms_changed -> _add_term_counts, _documents_changed: the
--     statement triggers (policies_triggers.sql) that keep the per-collection
--     sums the queries read
--   _term_weights, _collection_size: the readers (IDF, collection size),
--     which sum the per-document rows instead on Citus (_statistics_per_document)
--   _keep_collection_statistics, _drop_statistics_triggers: rebuild (repair)
--     and removal (hrag.distribute) of the sums and their triggers
-- Why statistics per document, summed per collection by folding triggers:
-- docs/decisions.md, "One candidate stage; IDF statistics per document".
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.node_lexical_terms (last changed in revision 0003)
-- Each search target's terms, computed once when the row is written (a
-- stored generated column), so a hybrid search only intersects arrays.
CREATE OR REPLACE FUNCTION hrag.node_lexical_terms(heading_path text[], content text, metadata jsonb)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT hrag.lexical_terms(array_to_string(heading_path, ' ') || ' '
                              || coalesce(metadata->>'question', content))
$$;
COMMENT ON FUNCTION hrag.node_lexical_terms(text[], text, jsonb) IS
    'The search terms stored for a node (heading path and text; the question of a QA node)';

-- hrag.lexical_terms (last changed in revision 0023)
-- A text's search terms, for a leaf and a question alike: English stems
-- without stop words, character bigrams of CJK runs (no spaces to split on),
-- and identifiers joined by underscores as one term beside their words, since
-- the parser reads an underscore as a space and a question names them exactly
-- (docs/decisions.md, "Identifiers joined by underscores are terms").
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

-- hrag.term_hash (last changed in revision 0020)
-- The hash of a term, and of a leaf's terms (in their order): the lexical
-- rows are found and scored by 64-bit integers, which compare faster than
-- text.  hashtextextended is kept stable across PostgreSQL versions.
CREATE OR REPLACE FUNCTION hrag.term_hash(term text)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT hashtextextended(term, 0)
$$;
COMMENT ON FUNCTION hrag.term_hash(text) IS
    'The 64-bit hash of a search term, as stored in nodes.lexical_hashes';

-- hrag.term_hashes (last changed in revision 0020)
-- A leaf's term hashes, for the generated column nodes.lexical_hashes.
CREATE OR REPLACE FUNCTION hrag.term_hashes(terms text[])
RETURNS bigint[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT coalesce(array_agg(hrag.term_hash(t.term) ORDER BY t.ord), '{}')
      FROM unnest(terms) WITH ORDINALITY AS t(term, ord)
$$;
COMMENT ON FUNCTION hrag.term_hashes(text[]) IS
    'The hashes of search terms, in their order (nodes.lexical_hashes of nodes.lexical_terms)';

-- hrag._term_weights (last changed in revision 0021)
-- The BM25 IDF of each query term in a collection (NULL: every collection
-- the caller sees), from the maintained document frequencies, so a question
-- costs an index lookup per term rather than a count through the GIN index.
CREATE OR REPLACE FUNCTION hrag._term_weights(terms text[], collection text)
RETURNS TABLE (term text, df bigint, idf real)
LANGUAGE plpgsql STABLE ROWS 10
AS $$
#variable_conflict use_column
DECLARE
    leaves      bigint;
    found_terms text[];
    found_df    bigint[];
BEGIN
    SELECT greatest(s.search_targets, 1) INTO leaves
      FROM hrag._collection_size(CASE WHEN collection IS NULL THEN NULL ELSE ARRAY[collection] END) AS s;
    IF hrag._statistics_per_document() THEN
        -- Citus: the per-document rows, summed on the shards
        SELECT array_agg(p.term), array_agg(p.df) INTO found_terms, found_df
          FROM (SELECT t.term, sum(t.leaves)::bigint AS df
                  FROM hrag.document_terms t
                 WHERE t.term = ANY (terms)
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)
                 GROUP BY t.term) AS p;
    ELSE
        -- the per-collection rows: a few per term, whatever the number of documents
        SELECT array_agg(p.term), array_agg(p.df) INTO found_terms, found_df
          FROM (SELECT t.term, sum(t.leaves)::bigint AS df
                  FROM hrag.collection_terms t
                 WHERE t.term = ANY (terms)
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)
                 GROUP BY t.term) AS p;
    END IF;
    RETURN QUERY
    SELECT q.term, f.df, ln(1.0 + (leaves - f.df + 0.5) / (f.df + 0.5))::real
      FROM unnest(terms) AS q(term)
      JOIN unnest(found_terms, found_df) AS f(term, df) ON f.term = q.term
     WHERE f.df > 0
     ORDER BY f.df, q.term;
END
$$;
COMMENT ON FUNCTION hrag._term_weights(text[], text) IS 'internal: BM25 IDF of query terms in a collection, not part of the API';

-- hrag.refresh_document_terms (last changed in revision 0029)
-- A document's term counts, size and sum of directions after ingestion wrote
-- its nodes, in the same transaction: writers of different documents never
-- touch the same rows.
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
       SET search_targets = c.targets, total_tokens = c.tokens, embedding_sum = c.directions
      FROM (SELECT t.targets, t.directions,
                   (SELECT coalesce(sum(n.subtree_tokens), 0) FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id AND n.parent_id IS NULL)::integer
                       AS tokens
              FROM (SELECT count(*)::integer AS targets, sum(l2_normalize(n.embedding)) AS directions
                      FROM hrag.nodes n
                     WHERE n.document_id = refresh_document_terms.document_id
                       AND n.embedding IS NOT NULL) AS t) AS c
     WHERE d.id = refresh_document_terms.document_id
       AND ((d.search_targets, d.total_tokens) IS DISTINCT FROM (c.targets, c.tokens)
            OR d.embedding_sum IS DISTINCT FROM c.directions);
END
$$;
COMMENT ON FUNCTION hrag.refresh_document_terms(uuid) IS
    'Rewrite one document''s lexical statistics from its rows (ingestion calls it in the document''s transaction)';

-- hrag._statistics_per_document (last changed in revision 0021)
-- Whether the statistics are the per-document rows (Citus) or the
-- per-collection ones (everywhere else).
CREATE OR REPLACE FUNCTION hrag._statistics_per_document()
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF to_regclass('pg_catalog.pg_dist_partition') IS NULL THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                    WHERE logicalrelid = 'hrag.document_terms'::regclass);
END
$$;
COMMENT ON FUNCTION hrag._statistics_per_document() IS
    'internal: are the lexical statistics the per-document rows (hrag.document_terms distributed by Citus), not part of the API';

-- hrag._add_term_counts (last changed in revision 0021)
-- Adds a statement's signed changes to the per-collection term counts: the
-- rows of each changed term that no other transaction holds (SKIP LOCKED)
-- are replaced by their sum with the change, so a writer never waits for
-- another and a term's count is the sum of its rows.
CREATE OR REPLACE FUNCTION hrag._add_term_counts(collections text[], terms text[], changes bigint[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    BEGIN
        WITH change AS (
            SELECT c.collection, c.term, sum(c.leaves) AS leaves
              FROM unnest(collections, terms, changes) AS c(collection, term, leaves)
             GROUP BY c.collection, c.term
        ),
        -- the rows of those terms no other transaction holds (one being folded
        -- elsewhere stays, and so does what that transaction inserts)
        folded AS (
            DELETE FROM hrag.collection_terms t
             WHERE t.ctid = ANY (ARRAY(
                       SELECT f.ctid FROM hrag.collection_terms f
                        WHERE (f.term, f.collection) IN (SELECT c.term, c.collection FROM change c)
                          FOR UPDATE SKIP LOCKED))
            RETURNING t.collection, t.term, t.leaves
        )
        INSERT INTO hrag.collection_terms (collection, term, leaves)
        SELECT x.collection, x.term, sum(x.leaves)
          FROM (SELECT * FROM change UNION ALL SELECT * FROM folded) AS x
         GROUP BY x.collection, x.term
        HAVING sum(x.leaves) <> 0;
    EXCEPTION WHEN serialization_failure THEN
        -- (REPEATABLE READ or SERIALIZABLE: a row folded by a transaction that
        -- committed since this one began cannot be locked; the change alone)
        INSERT INTO hrag.collection_terms (collection, term, leaves)
        SELECT c.collection, c.term, sum(c.leaves)
          FROM unnest(collections, terms, changes) AS c(collection, term, leaves)
         GROUP BY c.collection, c.term
        HAVING sum(c.leaves) <> 0;
    END;
END
$$;
COMMENT ON FUNCTION hrag._add_term_counts(text[], text[], bigint[]) IS
    'internal: add signed changes to hrag.collection_terms, folding the changed terms'' free rows, not part of the API';

-- hrag._document_terms_changed (last changed in revision 0021)
-- The trigger functions: each statement's change, from its transition
-- tables.  Statement triggers see every write (ingestion, a cascade, a
-- user's SQL, TRUNCATE) once per statement, not once per row.
CREATE OR REPLACE FUNCTION hrag._document_terms_changed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    c text[];
    t text[];
    n bigint[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hrag.collection_terms;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(r.leaves::bigint) INTO c, t, n
          FROM new_rows r;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(-r.leaves::bigint) INTO c, t, n
          FROM old_rows r;
    ELSE
        SELECT array_agg(r.collection), array_agg(r.term), array_agg(r.leaves) INTO c, t, n
          FROM (SELECT x.collection, x.term, x.leaves::bigint AS leaves FROM new_rows x
                UNION ALL
                SELECT x.collection, x.term, -x.leaves::bigint FROM old_rows x) AS r;
    END IF;
    IF c IS NOT NULL THEN
        PERFORM hrag._add_term_counts(c, t, n);
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hrag._document_terms_changed() IS
    'internal: the trigger keeping hrag.collection_terms, not part of the API';

-- hrag._documents_changed (last changed in revision 0029)
-- The same for hrag.documents: the change in the collections' sizes and
-- sums of directions, folded into hrag.collection_sizes as _add_term_counts
-- folds the terms.  (The fold is written here, not in a function taking
-- vector[], which could not be created before tables.sql installs pgvector.)
-- A change's sum of directions is signed: vectors have no negation, so the
-- old rows' sum is subtracted.
CREATE OR REPLACE FUNCTION hrag._documents_changed()
RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
    c  text[];
    n  bigint[];
    tk bigint[];
    v  vector[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        DELETE FROM hrag.collection_sizes;
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' THEN
        SELECT array_agg(r.collection), array_agg(r.targets), array_agg(r.tokens), array_agg(r.directions)
          INTO c, n, tk, v
          FROM (SELECT y.collection, sum(y.search_targets) AS targets, sum(y.total_tokens) AS tokens,
                       sum(y.embedding_sum) AS directions
                  FROM new_rows y GROUP BY y.collection) AS r
         WHERE r.targets <> 0 OR r.tokens <> 0;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT array_agg(r.collection), array_agg(-r.targets), array_agg(-r.tokens),
               array_agg(r.directions - r.directions - r.directions)
          INTO c, n, tk, v
          FROM (SELECT y.collection, sum(y.search_targets) AS targets, sum(y.total_tokens) AS tokens,
                       sum(y.embedding_sum) AS directions
                  FROM old_rows y GROUP BY y.collection) AS r
         WHERE r.targets <> 0 OR r.tokens <> 0;
    ELSE
        -- (most updates of a document change neither its size nor its
        -- directions: nothing to add)
        SELECT array_agg(coalesce(a.collection, b.collection)),
               array_agg(coalesce(a.targets, 0) - coalesce(b.targets, 0)),
               array_agg(coalesce(a.tokens, 0) - coalesce(b.tokens, 0)),
               array_agg(CASE WHEN b.directions IS NULL THEN a.directions
                              WHEN a.directions IS NULL THEN b.directions - b.directions - b.directions
                              ELSE a.directions - b.directions END)
          INTO c, n, tk, v
          FROM (SELECT y.collection, sum(y.search_targets) AS targets, sum(y.total_tokens) AS tokens,
                       sum(y.embedding_sum) AS directions
                  FROM new_rows y GROUP BY y.collection) AS a
          FULL JOIN (SELECT y.collection, sum(y.search_targets) AS targets, sum(y.total_tokens) AS tokens,
                            sum(y.embedding_sum) AS directions
                       FROM old_rows y GROUP BY y.collection) AS b ON b.collection = a.collection
         WHERE a.targets IS DISTINCT FROM b.targets OR a.tokens IS DISTINCT FROM b.tokens
            OR a.directions IS DISTINCT FROM b.directions;
    END IF;
    IF c IS NULL THEN
        RETURN NULL;
    END IF;
    -- The fold: every row of the changed collections that no other
    -- transaction holds is deleted, and their sum with the change inserted.
    BEGIN
        WITH folded AS (
            DELETE FROM hrag.collection_sizes s
             WHERE s.ctid = ANY (ARRAY(
                       SELECT f.ctid FROM hrag.collection_sizes f
                        WHERE f.collection = ANY (c)
                          FOR UPDATE SKIP LOCKED))
            RETURNING s.collection, s.search_targets, s.total_tokens, s.embedding_sum
        )
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens, embedding_sum)
        SELECT x.collection, sum(x.targets), sum(x.tokens), sum(x.directions)
          FROM (SELECT * FROM unnest(c, n, tk, v) AS d(collection, targets, tokens, directions)
                UNION ALL
                SELECT * FROM folded) AS x
         GROUP BY x.collection
        -- (a change of directions alone, as a reembed makes, while the
        -- collection's other rows are held, is kept: what it adds is not 0)
        HAVING sum(x.targets) <> 0 OR sum(x.tokens) <> 0 OR vector_norm(sum(x.directions)) > 1e-3;
    EXCEPTION WHEN serialization_failure THEN
        INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens, embedding_sum)
        SELECT * FROM unnest(c, n, tk, v);
    END;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION hrag._documents_changed() IS
    'internal: the trigger keeping hrag.collection_sizes, not part of the API';

-- hrag._keep_collection_statistics (last changed in revision 0029)
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
    INSERT INTO hrag.collection_sizes (collection, search_targets, total_tokens, embedding_sum)
    SELECT d.collection, sum(d.search_targets), sum(d.total_tokens), sum(d.embedding_sum)
      FROM hrag.documents d GROUP BY d.collection;
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

-- hrag._drop_statistics_triggers (last changed in revision 0021)
-- Drops the triggers that keep the sums (hrag.distribute: Citus refuses
-- triggers on distributed tables, and the readers then sum per document).
CREATE OR REPLACE FUNCTION hrag._drop_statistics_triggers()
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
    terms_distributed     boolean := false;
    documents_distributed boolean := false;
BEGIN
    -- (a distributed table has none of them, and Citus refuses DROP TRIGGER on one)
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
        terms_distributed := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                      WHERE logicalrelid = 'hrag.document_terms'::regclass);
        documents_distributed := EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition
                                          WHERE logicalrelid = 'hrag.documents'::regclass);
    END IF;
    IF NOT terms_distributed THEN
        DROP TRIGGER IF EXISTS document_terms_inserted ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_deleted ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_updated ON hrag.document_terms;
        DROP TRIGGER IF EXISTS document_terms_truncated ON hrag.document_terms;
    END IF;
    IF NOT documents_distributed THEN
        DROP TRIGGER IF EXISTS documents_inserted ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_deleted ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_updated ON hrag.documents;
        DROP TRIGGER IF EXISTS documents_truncated ON hrag.documents;
    END IF;
END
$$;
COMMENT ON FUNCTION hrag._drop_statistics_triggers() IS
    'internal: drop the triggers that keep the per-collection statistics (not those of a distributed table), not part of the API';

-- hrag._collection_size (last changed in revision 0021)
-- A collection's size (NULL: every collection the caller can see): the one
-- place that knows where it is kept (the sums, or the documents on Citus).
CREATE OR REPLACE FUNCTION hrag._collection_size(collections text[], OUT search_targets bigint, OUT total_tokens bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF hrag._statistics_per_document() THEN
        -- Citus: a sum over the documents, on the shards
        SELECT coalesce(sum(d.search_targets), 0), coalesce(sum(d.total_tokens), 0)
          INTO search_targets, total_tokens
          FROM hrag.documents d
         WHERE collections IS NULL OR d.collection = ANY (collections);
    ELSE
        SELECT coalesce(sum(s.search_targets), 0), coalesce(sum(s.total_tokens), 0)
          INTO search_targets, total_tokens
          FROM hrag.collection_sizes s
         WHERE collections IS NULL OR s.collection = ANY (collections);
    END IF;
END
$$;
COMMENT ON FUNCTION hrag._collection_size(text[]) IS
    'internal: search targets and stored tokens of collections (NULL: all visible), not part of the API';

