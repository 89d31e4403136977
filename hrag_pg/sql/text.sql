-- hrag-pg, text.sql: a node's full text and the node rows the modes return.
-- Text is stored once, per node, and a subtree is the pre-order range
-- seq .. subtree_end (docs/decisions.md, "Text stored once"), so a full text
-- is one range scan (_subtree_text), which hrag.node_text and the row steps
-- of parent_child.sql, merge.sql and budget.sql all use.  Applied before
-- tables.sql with lexical.sql.
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.node_text (last changed in revision 0010)
-- A node's full text by its id: the node's (document, range) first, then its text
-- by a statement of its own (on Citus the lookup by bare id asks every shard,
-- the text is read from one).  Callers that know the document use
-- hrag.node_text(document_id, node_id).
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
COMMENT ON FUNCTION hrag.node_text(uuid) IS
    'Full text of any node: its own text and its descendants'', in document order (NULL for an unknown id)';

-- hrag.node_text (last changed in revision 0009)
-- hrag.node_text(document_id, node_id): a node's full text, looked up with
-- its document id.  The same text as hrag.node_text(node_id), but both scans
-- filter on the distribution column, so on Citus it runs on the one shard
-- that holds the document (hrag.distribute() also makes it a distributed
-- function, so the whole call is delegated to that shard's worker); on a
-- single node it reads the primary key instead of the id index.  NULL for
-- an unknown (document, node) pair.
CREATE OR REPLACE FUNCTION hrag.node_text(document_id uuid, node_id uuid)
RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
    first_seq integer;
    last_seq  integer;
BEGIN
    SELECT n.seq, n.subtree_end INTO first_seq, last_seq
      FROM hrag.nodes n
     WHERE n.document_id = node_text.document_id
       AND n.id = node_text.node_id;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- Called here, not per row inside the lookup: on Citus a function that
    -- reads nodes must not run inside a query pushed down to a shard.
    RETURN hrag._subtree_text(node_text.document_id, first_seq, last_seq);
END
$$;
COMMENT ON FUNCTION hrag.node_text(uuid, uuid) IS
    'Full text of a node looked up with its document id (one shard on Citus); NULL if the pair is unknown';

-- hrag._subtree_text (last changed in revision 0006)
-- The one place where a full text is assembled: each node's separator and
-- content over seq first_seq .. last_seq, one range scan of the
-- (document_id, seq) index, so the document's original text comes back.
CREATE OR REPLACE FUNCTION hrag._subtree_text(document_id uuid, first_seq integer, last_seq integer)
RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE
AS $$
    SELECT coalesce(string_agg(CASE WHEN t.is_first THEN t.content ELSE t.separator || t.content END,
                               '' ORDER BY t.seq), '')
      FROM (SELECT d.seq, d.content, d.separator, d.seq = min(d.seq) OVER () AS is_first
              FROM hrag.nodes d
             WHERE d.document_id = _subtree_text.document_id
               AND d.seq BETWEEN _subtree_text.first_seq AND _subtree_text.last_seq
               AND d.content <> '') AS t
$$;
COMMENT ON FUNCTION hrag._subtree_text(uuid, integer, integer) IS 'internal: full text of a seq range, not part of the API';

-- hrag._node_rows_document (last changed in revision 0011)
-- The result rows of nodes in one document (doc NULL: every document).  Each
-- text is read by _subtree_text in a statement of its own with its document
-- given, so on Citus it is routed to the one shard that holds it.
CREATE OR REPLACE FUNCTION hrag._node_rows_document(doc uuid, node_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    FOR x IN
        SELECT n.id, n.document_id, n.depth, n.title, n.heading_path, n.seq, n.subtree_end, n.subtree_tokens,
               n.child_count
          FROM hrag.nodes n
         WHERE n.document_id = coalesce(doc, n.document_id) AND n.id = ANY (node_ids)
    LOOP
        node_id := x.id;
        document_id := x.document_id;
        depth := x.depth;
        title := x.title;
        heading_path := x.heading_path;
        content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
        token_count := x.subtree_tokens;
        child_count := x.child_count;
        RETURN NEXT;
    END LOOP;
END
$$;
ALTER FUNCTION hrag._node_rows_document(uuid, uuid[]) ROWS 4;
COMMENT ON FUNCTION hrag._node_rows_document(uuid, uuid[]) IS
    'internal: per document (one shard on Citus; doc NULL: every document of the nodes), nodes with their full text, not part of the API';

-- hrag._node_rows_each (last changed in revision 0011)
-- Per document of document_ids (all at once on a single node), the rows of
-- the nodes node_ids holds there (_node_rows_document).
CREATE OR REPLACE FUNCTION hrag._node_rows_each(node_ids uuid[], document_ids uuid[])
RETURNS TABLE (node_id uuid, document_id uuid, depth integer, title text, heading_path text[],
               content text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    this_doc uuid;
    doc_ids  uuid[];
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
        doc_ids := ARRAY(SELECT h.id FROM unnest(node_ids, document_ids) WITH ORDINALITY AS h(id, doc, ord)
                          WHERE h.doc = coalesce(this_doc, h.doc) ORDER BY h.ord);
        -- a statement of its own, so Citus delegates it to the document's worker
        -- (this_doc NULL: all the documents at once)
        RETURN QUERY SELECT * FROM hrag._node_rows_document(this_doc, doc_ids);
    END LOOP;
END
$$;
ALTER FUNCTION hrag._node_rows_each(uuid[], uuid[]) ROWS 4;
COMMENT ON FUNCTION hrag._node_rows_each(uuid[], uuid[]) IS
    'internal: hrag._node_rows_document for each document of the nodes on Citus, once for all of them elsewhere, not part of the API';
