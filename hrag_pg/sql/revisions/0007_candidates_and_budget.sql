-- Revision 0007: one candidate stage (search_hybrid: ANN plus GIN lexical
-- candidates, IDF from per-document statistics kept in the writer's
-- transaction), nodes.subtree_tokens, the budget mode (retrieve), and
-- parent_child without overlapping nodes.
-- Current definitions: hrag_pg/sql/search.sql, lexical.sql, budget.sql;
-- measurements: docs/decisions.md, "One candidate stage; IDF statistics per document, kept in the document's transaction".

-- ---------------------------------------------------------------------------
-- Bookkeeping columns and the statistics table.
-- ---------------------------------------------------------------------------
ALTER TABLE hrag.nodes ADD COLUMN subtree_tokens integer NOT NULL DEFAULT 0 CHECK (subtree_tokens >= 0);
COMMENT ON COLUMN hrag.nodes.subtree_tokens IS
    'Sum of token_count over the node''s subtree (nodes with text): the unit of hrag.retrieve''s budget';
UPDATE hrag.nodes n
   SET subtree_tokens = s.total
  FROM (SELECT a.id, coalesce(sum(d.token_count) FILTER (WHERE d.content <> ''), 0)::integer AS total
          FROM hrag.nodes a
          JOIN hrag.nodes d ON d.document_id = a.document_id AND d.seq BETWEEN a.seq AND a.subtree_end
         GROUP BY a.id) AS s
 WHERE s.id = n.id AND n.subtree_tokens <> s.total;

ALTER TABLE hrag.documents ADD COLUMN search_targets integer NOT NULL DEFAULT 0 CHECK (search_targets >= 0);
COMMENT ON COLUMN hrag.documents.search_targets IS
    'Number of embedded nodes of the document (the N of the lexical IDF), kept by hrag.refresh_document_terms';
ALTER TABLE hrag.documents ADD COLUMN total_tokens integer NOT NULL DEFAULT 0 CHECK (total_tokens >= 0);
COMMENT ON COLUMN hrag.documents.total_tokens IS
    'The document''s stored tokens (its root''s subtree_tokens): a collection''s size for hrag.retrieve_hits';

CREATE TABLE hrag.document_terms (
    document_id uuid NOT NULL,
    collection  text NOT NULL,
    term        text NOT NULL,
    -- search targets of the document that contain the term
    leaves      integer NOT NULL CHECK (leaves > 0),
    PRIMARY KEY (document_id, term),
    FOREIGN KEY (document_id, collection) REFERENCES hrag.documents (id, collection)
        ON DELETE CASCADE ON UPDATE CASCADE
);
COMMENT ON TABLE hrag.document_terms IS
    'Per document and lexical term, how many search targets contain it: the collection IDF statistics';
-- A term's document frequency, per collection or overall: an index-only sum.
CREATE INDEX document_terms_term_idx ON hrag.document_terms (term, collection) INCLUDE (leaves);
-- The lexical channel: search targets containing a term, over the whole collection.
CREATE INDEX nodes_lexical_terms_idx ON hrag.nodes USING gin (lexical_terms) WHERE lexical_terms IS NOT NULL;

ALTER TABLE hrag.document_terms ENABLE ROW LEVEL SECURITY;
CREATE POLICY document_terms_by_collection ON hrag.document_terms
    USING ((SELECT hrag.visible_collections()) IS NULL
           OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])))
    WITH CHECK ((SELECT hrag.visible_collections()) IS NULL
                OR collection = ANY (CAST((SELECT hrag.visible_collections()) AS text[])));

-- Roles that could read or write nodes before this revision get the same on the statistics.
DO $$
DECLARE
    grant_row record;
BEGIN
    FOR grant_row IN
        SELECT DISTINCT grantee, privilege_type
          FROM information_schema.role_table_grants
         WHERE table_schema = 'hrag' AND table_name = 'nodes'
           AND privilege_type IN ('SELECT', 'INSERT', 'DELETE')
           AND grantee <> current_user
    LOOP
        EXECUTE format('GRANT %s ON hrag.document_terms TO %I', grant_row.privilege_type, grant_row.grantee);
    END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION hrag.grant_reader(role_name name)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA hrag TO %I', role_name);
    EXECUTE format('GRANT SELECT ON hrag.documents, hrag.nodes, hrag.document_terms, hrag.config TO %I', role_name);
    -- The Python API checks the schema revision before its first call.
    IF to_regclass('hrag.alembic_version') IS NOT NULL THEN
        EXECUTE format('GRANT SELECT ON hrag.alembic_version TO %I', role_name);
    END IF;
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA hrag TO %I', role_name);
    EXECUTE format('REVOKE EXECUTE ON FUNCTION hrag.repair_integrity(), hrag.grant_reader(name), '
                   'hrag.create_tenant_role(name, text[], boolean) FROM %I', role_name);
END
$$;

CREATE OR REPLACE FUNCTION hrag.create_tenant_role(role_name name, collections text[], can_write boolean DEFAULT false)
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    IF collections IS NULL OR cardinality(collections) = 0 THEN
        RAISE EXCEPTION 'hrag: a tenant role needs at least one collection'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = role_name) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', role_name);
    END IF;
    INSERT INTO hrag.tenant_collections (role_name, collection)
    SELECT create_tenant_role.role_name, c FROM unnest(collections) AS c
    ON CONFLICT DO NOTHING;
    PERFORM hrag.grant_reader(role_name);
    IF can_write THEN
        EXECUTE format('GRANT INSERT, UPDATE, DELETE ON hrag.documents, hrag.nodes, hrag.document_terms TO %I',
                       role_name);
    END IF;
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.refresh_document_terms: rewrite one document's statistics from its
-- rows.  Ingestion calls it in the document's transaction, after the nodes.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.refresh_document_terms(document_id uuid)
RETURNS void
LANGUAGE sql VOLATILE
AS $$
    DELETE FROM hrag.document_terms t WHERE t.document_id = refresh_document_terms.document_id;
    INSERT INTO hrag.document_terms (document_id, collection, term, leaves)
    SELECT n.document_id, n.collection, term.value, count(*)
      FROM hrag.nodes n
     CROSS JOIN LATERAL unnest(n.lexical_terms) AS term(value)
     WHERE n.document_id = refresh_document_terms.document_id
       AND n.lexical_terms IS NOT NULL
     GROUP BY n.document_id, n.collection, term.value;
    UPDATE hrag.documents d
       SET search_targets = (SELECT count(*) FROM hrag.nodes n
                              WHERE n.document_id = d.id AND n.embedding IS NOT NULL),
           total_tokens = (SELECT coalesce(sum(n.subtree_tokens), 0) FROM hrag.nodes n
                            WHERE n.document_id = d.id AND n.parent_id IS NULL)
     WHERE d.id = refresh_document_terms.document_id;
$$;

-- Existing installations: statistics for every stored document.
SELECT hrag.refresh_document_terms(d.id) FROM hrag.documents d;

-- ---------------------------------------------------------------------------
-- hrag._term_weights: the query's terms that occur in the collection, with
-- their BM25 IDF, ln(1 + (N - df + 0.5) / (df + 0.5)), rarest first.  Terms
-- absent from the collection cannot tell candidates apart and are left out
-- (a misspelt word must not mute every other term).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._term_weights(terms text[], collection text)
RETURNS TABLE (term text, df bigint, idf real)
LANGUAGE sql STABLE
AS $$
    WITH n AS (
        SELECT greatest(coalesce(sum(d.search_targets), 0), 1) AS leaves
          FROM hrag.documents d
         WHERE _term_weights.collection IS NULL OR d.collection = _term_weights.collection
    ),
    freq AS (
        SELECT q.term,
               (SELECT coalesce(sum(t.leaves), 0)
                  FROM hrag.document_terms t
                 WHERE t.term = q.term
                   AND (_term_weights.collection IS NULL OR t.collection = _term_weights.collection)) AS df
          FROM unnest(terms) AS q(term)
    )
    SELECT f.term, f.df, ln(1.0 + (n.leaves - f.df + 0.5) / (f.df + 0.5))::real
      FROM freq f, n
     WHERE f.df > 0
     ORDER BY f.df, f.term
$$;

-- The search functions return tens of rows, not the 1,000 the planner assumes
-- for a set-returning function: with the default it joins their rows to
-- hrag.nodes by a sequential scan instead of primary-key lookups.
ALTER FUNCTION hrag.search_leaves(vector, integer, text, jsonb) ROWS 30;

-- ---------------------------------------------------------------------------
-- hrag.search_hybrid: the candidate stage every mode reads its hits from.
--
-- Vector channel: the `candidates` nearest search targets (default 3k, at
-- least 30; filters inside the HNSW scan, as in search_leaves).
-- Lexical channel: search targets containing the query's rarest terms
-- (terms taken rarest first while their document frequencies add up to at
-- most 300, always at least the rarest), found through the GIN index over
-- the whole collection with the same filters; the best `candidates` of them
-- by lexical coverage join the pool, with their exact cosine.
-- Every candidate is scored
--     (1 - lexical_weight) * cosine + lexical_weight * lexical coverage
-- and the best k are returned.  With no usable query terms (NULL or empty
-- text, only stop words, no term in the collection) the score is the cosine.
-- min_relative_score drops hits below that share of the best hit's score.
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
          JOIN hrag.nodes n ON n.id = b.node_id
         WHERE NOT EXISTS (SELECT 1 FROM vector_hit v WHERE v.node_id = b.node_id)
    ),
    scored AS (
        SELECT p.node_id, p.parent_id, p.document_id, p.vector_score,
               CASE WHEN total > 0
                    THEN coalesce((SELECT sum(w.idf) FROM unnest(terms, idfs) AS w(term, idf)
                                    WHERE w.term = ANY (n.lexical_terms)), 0) / total
                    ELSE 0 END::real AS lexical_score
          FROM pool p
          JOIN hrag.nodes n ON n.id = p.node_id
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
-- hrag.parent_child_hits: small-to-big for hits from anywhere, never two
-- overlapping nodes.
--
-- Hits in array order are the rank order.  Each hit expands to its parent
-- (a "group" is no context of its own: to the group's parent).  Parents are
-- taken in first-seen order; a parent that contains, or lies inside, a
-- parent already taken is skipped (its text would be returned twice), and
-- max_parents counts the distinct, non-overlapping parents.  As before, only
-- the first top_k_children hits (all when NULL) count as matches; later hits
-- only contribute parents not seen yet.  Unknown ids and roots are ignored.
-- ---------------------------------------------------------------------------
DROP FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real);
DROP FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer);

CREATE FUNCTION hrag.parent_child_hits(
    node_ids       uuid[],
    scores         real[],
    max_parents    integer DEFAULT 4,
    top_k_children integer DEFAULT NULL
)
RETURNS TABLE (node_id uuid, document_id uuid, title text, heading_path text[], content text,
               score real, matched_children uuid[], rank integer, token_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    parent    record;
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

    FOR parent IN
        WITH hit AS (
            SELECT h.id, h.score, h.ord,
                   CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END AS parent_id
              FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
              JOIN hrag.nodes n ON n.id = h.id
              JOIN hrag.nodes p ON p.id = n.parent_id
        )
        SELECT h.parent_id, min(h.ord) AS first_seen, n.document_id, n.seq, n.subtree_end
          FROM hit h
          JOIN hrag.nodes n ON n.id = h.parent_id
         GROUP BY h.parent_id, n.document_id, n.seq, n.subtree_end
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
        SELECT h.id, h.score, h.ord,
               CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END AS parent_id
          FROM unnest(node_ids, scores) WITH ORDINALITY AS h(id, score, ord)
          JOIN hrag.nodes n ON n.id = h.id
          JOIN hrag.nodes p ON p.id = n.parent_id
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
    SELECT p.id, p.document_id, p.title, p.heading_path,
           hrag._subtree_text(p.document_id, p.seq, p.subtree_end),
           picked.best, picked.matched,
           (row_number() OVER (ORDER BY picked.first_seen))::integer,
           p.subtree_tokens
      FROM picked
      JOIN hrag.nodes p ON p.id = picked.parent_id
     ORDER BY picked.first_seen;
END
$$;

-- hrag.parent_child: search_leaves -> parent_child_hits, one round trip.
-- The ANN step takes enough children for max_parents distinct parents in
-- all but pathological trees (at least 10 per parent asked for).
CREATE FUNCTION hrag.parent_child(
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
    sims   real[];
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(top_k_children, 'top_k_children');
    PERFORM hrag._check_count(max_parents, 'max_parents');
    SELECT coalesce(array_agg(s.node_id ORDER BY s.score DESC, s.node_id), '{}'),
           coalesce(array_agg(s.score ORDER BY s.score DESC, s.node_id), '{}')
      INTO ids, sims
      FROM hrag.search_leaves(query, least(greatest(top_k_children, 10 * max_parents), 1000), collection, filter) AS s
      JOIN hrag.nodes n ON n.id = s.node_id
     WHERE n.parent_id IS NOT NULL
       AND (min_score IS NULL OR s.score >= min_score);
    RETURN QUERY SELECT * FROM hrag.parent_child_hits(ids, sims, max_parents, top_k_children);
END
$$;


-- ---------------------------------------------------------------------------
-- auto_merge_hits / auto_merge: unchanged merge, plus each result's stored
-- subtree token count (the unit budgets are counted in).
-- ---------------------------------------------------------------------------
DROP FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb);
DROP FUNCTION hrag.auto_merge_hits(uuid[], real[], real);

CREATE FUNCTION hrag.auto_merge_hits(
    node_ids        uuid[],
    scores          real[],
    merge_threshold real DEFAULT 0.5
)
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, score real, merged_from uuid[], hit_ratio real, rank integer,
               token_count integer)
LANGUAGE sql STABLE
AS $$
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
          JOIN hrag.nodes n ON n.id = hit.id
        UNION ALL
        SELECT c.hit, c.score, p.id, p.parent_id, p.depth, p.child_count, c.steps + 1
          FROM chain c
          JOIN hrag.nodes p ON p.id = c.parent_id
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
    SELECT n.id, n.document_id, n.depth, n.title, n.heading_path,
           hrag._subtree_text(n.document_id, n.seq, n.subtree_end),
           r.score, r.merged_from,
           (SELECT m.ratio FROM final f, unnest(f.merged, f.ratios) AS m(id, ratio) WHERE m.id = r.top),
           (row_number() OVER (ORDER BY r.score DESC, n.depth, n.id))::integer,
           n.subtree_tokens
      FROM result r
      JOIN hrag.nodes n ON n.id = r.top
     -- The argument checks: a constant qual of the top query, evaluated once
     -- before any row (a CTE the plan never reads from would never run them).
     WHERE hrag._check_hits(node_ids, scores) AND hrag._check_threshold(merge_threshold)
     ORDER BY r.score DESC, n.depth, n.id
$$;

CREATE FUNCTION hrag.auto_merge(
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
        SELECT s.node_id, s.score
          FROM hrag.search_leaves(query, top_k, collection, filter) AS s
    )
    SELECT m.*
      FROM hrag.auto_merge_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                                ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                                merge_threshold) AS m
     ORDER BY m.rank
$$;


-- ---------------------------------------------------------------------------
-- hrag.sample_hits: how many hits a merge should take in a collection.
-- The hit ratio means something only while the hits are a small sample of
-- the collection: twelve hits in a 35-item policy are a third of it, and
-- merging them climbs to the whole document whatever the question.  So at
-- most max_share of the collection's search targets (at least 1), and never
-- more than k.  The Python and CLI auto-merge use it by default (share 0.1);
-- hrag.auto_merge keeps the seed's plain top_k.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.sample_hits(k integer, collection text DEFAULT NULL, max_share real DEFAULT 0.1)
RETURNS integer
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN max_share IS NULL THEN k
                ELSE least(k, greatest(1, ceil(max_share * (
                         SELECT coalesce(sum(d.search_targets), 0) FROM hrag.documents d
                          WHERE sample_hits.collection IS NULL OR d.collection = sample_hits.collection)))::integer)
           END
$$;

-- A numeric tuning setting (SET hrag.auto_floor = 0.5), or its default.
CREATE FUNCTION hrag._setting(name text, default_value double precision)
RETURNS double precision
LANGUAGE sql STABLE
AS $$
    SELECT coalesce(nullif(current_setting(name, true), '')::double precision, default_value)
$$;

-- ---------------------------------------------------------------------------
-- hrag.retrieve_hits: the best non-overlapping context within a budget.
--
-- The hits' ancestor paths form a small subtree.  Every node on it (leaf,
-- group, section, chapter, document) is a candidate with
--   evidence = sum over the hits below it of exp((score - best score) / 0.1)
--              (the best hit weighs 1; a hit 0.1 below it about 0.37),
--   tokens   = its subtree_tokens,
--   priority = evidence / tokens ^ 0.5,
--   lift     = (its share of all the evidence) / (its share of the searched
--              text: its tokens over the stored tokens of the hits' collections).
-- The exponent below 1 lets a node whose children are mostly hits outrank
-- its best single hit (a broad question's section), while a large node with
-- one strong hit and weak neighbours ranks below that hit (a narrow one).
-- Candidates are taken in priority order while they fit the budget: a node
-- inside one already taken is skipped; a node above taken ones replaces
-- them if the extra tokens fit.  A candidate with a lift below 2 is not
-- taken: in a small collection every part of a document is hit, and without
-- this the whole document would be returned whatever the question.  So
-- nothing is returned twice, the total never exceeds max_tokens when a hit
-- fits, and a result that does not fit is replaced by its best parts.  If no
-- candidate qualifies, the best hit that fits is returned; if none fits, the
-- best hit alone, marked 'over budget' (the caller sees why).
-- The constants are settings (SET hrag.auto_sharpness, hrag.auto_size_exponent,
-- hrag.auto_min_lift; hrag.auto_floor, off by default, stops at a share of the
-- first taken node's priority).
--
-- token_count and the budget are stored token counts (nodes.subtree_tokens:
-- the embedding model's tokenizer at ingestion).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.retrieve_hits(
    node_ids   uuid[],
    scores     real[],
    max_tokens integer DEFAULT 2000
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
     WHERE d.collection IN (SELECT n.collection FROM hrag.nodes n WHERE n.id = ANY (node_ids));

    FOR c IN
        WITH RECURSIVE
        hit AS (
            SELECT h.id, max(h.score) AS score FROM unnest(node_ids, scores) AS h(id, score) GROUP BY h.id
        ),
        weighted AS (
            SELECT hit.id, hit.score,
                   exp(greatest((hit.score - max(hit.score) OVER ())::double precision / sharpness, -50)) AS weight
              FROM hit
        ),
        chain AS (
            SELECT w.id AS hit, w.score, w.weight, n.id AS node, n.parent_id
              FROM weighted w
              JOIN hrag.nodes n ON n.id = w.id
            UNION ALL
            SELECT c.hit, c.score, c.weight, p.id, p.parent_id
              FROM chain c
              JOIN hrag.nodes p ON p.id = c.parent_id
        ),
        cand AS (
            SELECT c.node, sum(c.weight) AS evidence, max(c.score) AS best, count(*) AS hits
              FROM chain c
             GROUP BY c.node
        )
        SELECT cand.node, cand.evidence, cand.best, cand.hits, n.document_id, n.seq, n.subtree_end,
               n.subtree_tokens, n.child_count, n.depth,
               cand.evidence / power(greatest(n.subtree_tokens, 1), size_exponent) AS priority,
               -- share of the evidence over share of the searched text: 1 = no better than chance
               (cand.evidence / (SELECT sum(w.weight) FROM weighted w))
                   / (greatest(n.subtree_tokens, 1) / scope_tokens) AS lift
          FROM cand
          JOIN hrag.nodes n ON n.id = cand.node
         ORDER BY priority DESC, cand.best DESC, n.depth DESC, n.id
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

    IF cardinality(sel_ids) = 0 THEN
        -- No candidate was worth taking (or fitted): the best hit that fits, so a
        -- hit never yields nothing; if none fits, the best hit alone, flagged.
        SELECT ARRAY[n.id], ARRAY[CASE WHEN n.subtree_tokens <= max_tokens THEN 'hit'
                                       ELSE 'over budget: the best hit alone is larger than max_tokens' END],
               n.subtree_tokens > max_tokens
          INTO sel_ids, sel_why, over_budget
          FROM unnest(node_ids, scores) AS h(id, score)
          JOIN hrag.nodes n ON n.id = h.id
         ORDER BY n.subtree_tokens > max_tokens, h.score DESC, n.id
         LIMIT 1;
    END IF;

    RETURN QUERY
    WITH hit AS (
        SELECT n.id, n.document_id, n.seq, max(h.score) AS score
          FROM unnest(node_ids, scores) AS h(id, score)
          JOIN hrag.nodes n ON n.id = h.id
         GROUP BY n.id, n.document_id, n.seq
    ),
    picked AS (
        SELECT n.id, n.document_id, n.seq, n.subtree_end, x.why
          FROM unnest(sel_ids, sel_why) AS x(id, why)
          JOIN hrag.nodes n ON n.id = x.id
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
                              WHERE a.parent_id = p.id AND a.document_id = p.document_id
                                AND hit.seq BETWEEN a.seq AND a.subtree_end) AS child ON true
         GROUP BY p.id
    )
    SELECT n.id, n.document_id, n.depth, n.title, n.heading_path,
           hrag._subtree_text(n.document_id, n.seq, n.subtree_end),
           a.best::real, a.merged_from,
           CASE WHEN n.child_count > 0 THEN (a.children_hit::real / n.child_count)::real END,
           (row_number() OVER (ORDER BY a.best DESC, n.depth, n.id))::integer,
           n.subtree_tokens,
           CASE WHEN over_budget THEN p.why
                WHEN p.why = 'hit' THEN 'direct hit'
                ELSE format('%s of %s children hit, %s hits inside', a.children_hit, n.child_count, a.hits_inside)
           END
      FROM picked p
      JOIN absorbed a ON a.id = p.id
      JOIN hrag.nodes n ON n.id = p.id
     ORDER BY a.best DESC, n.depth, n.id;
END
$$;

-- ---------------------------------------------------------------------------
-- hrag.retrieve: the candidate stage (search_hybrid) -> retrieve_hits, one
-- round trip.  top_k hits feed the selection (their weights fall off fast
-- below the best, so more hits add evidence for broad questions without
-- diluting narrow ones).
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag.retrieve(
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
        SELECT s.node_id, s.score
          FROM hrag.search_hybrid(query, query_text, top_k, collection, filter, lexical_weight) AS s
    )
    SELECT r.*
      FROM hrag.retrieve_hits(ARRAY(SELECT h.node_id FROM hits h ORDER BY h.score DESC, h.node_id),
                              ARRAY(SELECT h.score FROM hits h ORDER BY h.score DESC, h.node_id),
                              max_tokens) AS r
     ORDER BY r.rank
$$;

ALTER FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) ROWS 30;
ALTER FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) ROWS 4;
ALTER FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) ROWS 4;
ALTER FUNCTION hrag.auto_merge_hits(uuid[], real[], real) ROWS 10;
ALTER FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) ROWS 10;
ALTER FUNCTION hrag.retrieve_hits(uuid[], real[], integer) ROWS 10;
ALTER FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) ROWS 10;

COMMENT ON FUNCTION hrag.refresh_document_terms(uuid) IS
    'Rewrite one document''s lexical statistics from its rows (ingestion calls it in the document''s transaction)';
COMMENT ON FUNCTION hrag._term_weights(text[], text) IS 'internal: BM25 IDF of query terms in a collection, not part of the API';
COMMENT ON FUNCTION hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real) IS
    'The candidate stage: ANN candidates plus lexical candidates from the whole collection, fused (cosine and IDF-weighted term coverage)';
COMMENT ON FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) IS
    'Small-to-big for hits from elsewhere (array order is rank order); never two overlapping parents';
COMMENT ON FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) IS
    'Small-to-big: match the top children, return their distinct, non-overlapping parents'' full text';
COMMENT ON FUNCTION hrag.retrieve_hits(uuid[], real[], integer) IS
    'The best non-overlapping context within max_tokens for hits from anywhere, with why each node was chosen';
COMMENT ON FUNCTION hrag.retrieve(vector, text, integer, text, jsonb, integer, real) IS
    'Budget-aware retrieval: candidates (vector + lexical) -> the best non-overlapping context within max_tokens';
COMMENT ON FUNCTION hrag.auto_merge(vector, integer, real, text, jsonb) IS
    'Auto-merging: hit leaves, replace them by their parent where hit children / children >= merge_threshold, upward';
COMMENT ON FUNCTION hrag.auto_merge_hits(uuid[], real[], real) IS
    'The auto-merge for hits from elsewhere (a reranker, a keyword search), with why each node was returned';
COMMENT ON FUNCTION hrag._setting(text, double precision) IS 'internal: a numeric hrag.* setting or its default, not part of the API';
COMMENT ON FUNCTION hrag.sample_hits(integer, text, real) IS
    'How many hits a merge should take: k, but at most max_share of the collection''s search targets';
