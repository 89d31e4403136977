-- hrag-pg, parent_child.sql: Parent-Child (small-to-big): search the leaves,
-- return their parents, each once, best first, none inside another.
--
--   hrag.parent_child(question) -> search_leaves (search.sql) -> _parent_child_hits
--   hrag.parent_child_hits(hits) -> _document_ids (common.sql) -> _parent_child_hits
--   _parent_child_hits -> _parents_each -> _parents_document; rows from text.sql
-- Budgets: _fit_budget (budget.sql).
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.parent_child (last changed in revision 0010)
-- Parent-child for a question: search_leaves, then the parent-child step,
-- in one round trip.
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
ALTER FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) ROWS 4;
COMMENT ON FUNCTION hrag.parent_child(vector, integer, integer, text, jsonb, real) IS
    'Small-to-big: match the top children, return their distinct, non-overlapping parents'' full text';

-- hrag.parent_child_hits (last changed in revision 0010)
-- Parent-child for hits from anywhere (a reranker, a keyword search), after
-- looking up each hit's document.
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
ALTER FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) ROWS 4;
COMMENT ON FUNCTION hrag.parent_child_hits(uuid[], real[], integer, integer) IS
    'Small-to-big for hits from elsewhere (array order is rank order); never two overlapping parents';

-- hrag._parent_child_hits (last changed in revision 0010)
-- The coordinator step of parent_child and parent_child_hits: each hit's
-- parent (per document), the parents in the order of their best hit, each
-- once, a parent overlapping one already kept (inside it or around it)
-- skipped, so no text comes back twice; at most max_parents.
-- Scored by their best hit, with the hits that chose them (matched_children).
CREATE OR REPLACE FUNCTION hrag._parent_child_hits(
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
ALTER FUNCTION hrag._parent_child_hits(uuid[], uuid[], real[], integer, integer) ROWS 4;
COMMENT ON FUNCTION hrag._parent_child_hits(uuid[], uuid[], real[], integer, integer) IS
    'internal: parent-child for hits with their documents, not part of the API';

-- hrag._parents_document (last changed in revision 0011)
-- The parent of each hit in one document (doc NULL: every document).  A
-- 'group' parent is an ingestion artefact that packs short blocks, not a
-- section a reader knows, so its own parent is returned instead.
CREATE OR REPLACE FUNCTION hrag._parents_document(doc uuid, node_ids uuid[], ords bigint[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    SELECT n.document_id, h.ord, up.id, up.seq, up.subtree_end
      FROM unnest(node_ids, ords) AS h(id, ord)
      JOIN hrag.nodes n ON n.document_id = coalesce(doc, n.document_id) AND n.id = h.id
      JOIN hrag.nodes p ON p.document_id = coalesce(doc, n.document_id) AND p.id = n.parent_id
      JOIN hrag.nodes up ON up.document_id = coalesce(doc, n.document_id)
                        AND up.id = CASE WHEN p.kind = 'group' THEN p.parent_id ELSE p.id END;
END
$$;
ALTER FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) ROWS 30;
COMMENT ON FUNCTION hrag._parents_document(uuid, uuid[], bigint[]) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), the parent each hit expands to, not part of the API';

-- hrag._parents_each (last changed in revision 0011)
-- Splits the hits by document for _parents_document where hrag.nodes is
-- distributed (one worker each); elsewhere one call takes them all.
CREATE OR REPLACE FUNCTION hrag._parents_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (document_id uuid, ord bigint, parent_id uuid, seq integer, subtree_end integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
    doc_ords bigint[];
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
        SELECT array_agg(h.id ORDER BY h.ord), array_agg(h.ord ORDER BY h.ord) INTO doc_ids, doc_ords
          FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
         WHERE h.doc = coalesce(this_doc, h.doc);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._parents_document(this_doc, doc_ids, doc_ords);
    END LOOP;
END
$$;
ALTER FUNCTION hrag._parents_each(uuid[], uuid[]) ROWS 30;
COMMENT ON FUNCTION hrag._parents_each(uuid[], uuid[]) IS
    'internal: hrag._parents_document for each document of the hits on Citus, once for all of them elsewhere, not part of the API';
