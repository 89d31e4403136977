-- hrag-pg, navigation.sql: the heading tree as a map (issue #42): hrag.outline lists the
-- sections of the visible documents with their token counts, hrag.children
-- expands one node a level, hrag.node reads one node with its full text.  An
-- agent reads the outline, then expands or reads the nodes it needs
-- (PageIndex-style navigation) instead of searching.
--
-- The current definitions (docs/migrations.md says how to change one); the
-- revision that last changed each is named above it, and its file in
-- revisions/ has the longer history.  Applied by a fresh install and by the
-- newest revision that changes this topic (schema_sql.apply_topic).
--
-- All three are SECURITY INVOKER like every hrag function: row-level
-- security decides which documents a tenant sees, so another tenant's source
-- or node id is an unknown one.  On Citus every join is on the distribution
-- column (documents.id = nodes.document_id, parent and child by
-- document_id), so each query is pushed down to the shards whole, and no
-- function that reads nodes runs inside a pushed-down query (hrag.node reads
-- the text by a statement of its own, as hrag.node_text does).

-- hrag._outline (last changed in revision 0028)
-- The rows of hrag.outline.  A function of its own because PL/pgSQL refuses
-- an argument and an output column of the same name (collection, source):
-- hrag.outline is the SQL wrapper with the names a caller writes.
--
-- Which nodes make the map: every node down to max_depth that a reader
-- navigates by, i.e. one that has children (the root, chapters, sections,
-- classes, clauses with items) or a title (a section without body text, a
-- function, a page, a clause without items).  Untitled leaves (paragraphs,
-- sentences, windows) are the reading, not the map: listing them would make
-- the default outline of a Markdown file (root > H1 > H2 > paragraphs) the
-- whole document without its text; a section's token_count already says how
-- much they hold, and hrag.children/hrag.node read them.  Markup leaves
-- (navigation and markup text that is never searched) are left out too.
--
-- token_count is the subtree's (subtree_tokens: what reading the node with
-- hrag.node_text costs); child_count is the stored number of children (the
-- auto-merge denominator, markup leaves included).
--
-- Document order: by source, then collection (the same source may be stored
-- in two collections), then seq (pre-order, so each node follows its parent
-- and precedes its later siblings' subtrees; position alone would interleave
-- the levels).
CREATE OR REPLACE FUNCTION hrag._outline(of_collection text, of_source text, max_depth integer)
RETURNS TABLE (node_id uuid, document_id uuid, source text, collection text, depth integer,
               heading_path text[], title text, kind text, token_count integer, child_count integer)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    found_in text[];
BEGIN
    -- 0 is valid (the document roots only); 100 is far below any real
    -- heading tree's depth, and deeper nodes stay reachable by hrag.children.
    IF max_depth IS NULL OR max_depth < 0 OR max_depth > 100 THEN
        RAISE EXCEPTION 'hrag: argument "max_depth" must be between 0 and 100, got %', coalesce(max_depth::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A named source must be one visible document: unknown (or another
    -- tenant's, which is the same thing) and ambiguous names are refused by name.
    IF of_source IS NOT NULL THEN
        SELECT array_agg(d.collection ORDER BY d.collection) INTO found_in
          FROM hrag.documents d
         WHERE d.source = of_source
           AND (of_collection IS NULL OR d.collection = of_collection);
        IF found_in IS NULL THEN
            RAISE EXCEPTION 'hrag: argument "source": no document % is stored%', quote_literal(of_source),
                  CASE WHEN of_collection IS NULL THEN ''
                       ELSE ' in collection ' || quote_literal(of_collection) END
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF cardinality(found_in) > 1 THEN
            RAISE EXCEPTION 'hrag: argument "source": % is stored in collections %; pass "collection" to choose one',
                  quote_literal(of_source), array_to_string(found_in, ', ')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    RETURN QUERY
        SELECT n.id, n.document_id, d.source, d.collection, n.depth, n.heading_path, n.title, n.kind,
               n.subtree_tokens, n.child_count
          FROM hrag.documents d
          JOIN hrag.nodes n ON n.document_id = d.id
         WHERE (of_collection IS NULL OR d.collection = of_collection)
           AND (of_source IS NULL OR d.source = of_source)
           AND n.depth <= _outline.max_depth
           AND (n.child_count > 0 OR n.title IS NOT NULL OR n.depth = 0)
           AND NOT (n.kind = 'markup' AND n.child_count = 0)
         ORDER BY d.source, d.collection, n.seq;
END
$$;
COMMENT ON FUNCTION hrag._outline(text, text, integer) IS
    'internal: the rows of hrag.outline (argument names that do not clash with its columns), not part of the API';

-- hrag.outline (last changed in revision 0028)
CREATE OR REPLACE FUNCTION hrag.outline(
    collection text    DEFAULT NULL,
    source     text    DEFAULT NULL,
    max_depth  integer DEFAULT 3
)
RETURNS TABLE (node_id uuid, document_id uuid, source text, collection text, depth integer,
               heading_path text[], title text, kind text, token_count integer, child_count integer)
LANGUAGE sql STABLE
AS $$
    SELECT * FROM hrag._outline(outline.collection, outline.source, outline.max_depth)
$$;
COMMENT ON FUNCTION hrag.outline(text, text, integer) IS
    'The heading tree of the visible documents (one collection, or one source) down to max_depth, in document order: each navigable node with its subtree''s tokens and child count';

-- hrag.children (last changed in revision 0028)
-- Expanding one node of the outline: all its children in document order,
-- untitled leaves included (this is where the paragraphs show up), markup
-- leaves left out as in hrag.outline.  An unknown id (or another tenant's,
-- or NULL) has no children, as hrag.node_text returns NULL for it; hrag.node
-- tells an unknown node from a leaf.  The parent and its children are joined
-- on document_id too, so on Citus each shard answers for its own documents.
CREATE OR REPLACE FUNCTION hrag.children(node_id uuid)
RETURNS TABLE (node_id uuid, document_id uuid, source text, collection text, depth integer,
               heading_path text[], title text, kind text, token_count integer, child_count integer)
LANGUAGE sql STABLE
AS $$
    SELECT c.id, c.document_id, d.source, d.collection, c.depth, c.heading_path, c.title, c.kind,
           c.subtree_tokens, c.child_count
      FROM hrag.nodes p
      JOIN hrag.nodes c ON c.document_id = p.document_id AND c.parent_id = p.id
      JOIN hrag.documents d ON d.id = c.document_id
     WHERE p.id = children.node_id
       AND NOT (c.kind = 'markup' AND c.child_count = 0)
     ORDER BY c.seq
$$;
COMMENT ON FUNCTION hrag.children(uuid) IS
    'The children of a node in document order (markup leaves left out), with the columns of hrag.outline; none for an unknown id';

-- hrag.node (last changed in revision 0028)
-- Reading one node: the outline's columns, its parent and its full text, in
-- one round trip (an agent that opens a node wants where it sits and what it
-- says).  No row for an unknown id.  (The argument is id: PL/pgSQL refuses
-- one named like the output column node_id.)
CREATE OR REPLACE FUNCTION hrag.node(id uuid)
RETURNS TABLE (node_id uuid, document_id uuid, source text, collection text, depth integer,
               heading_path text[], title text, kind text, token_count integer, child_count integer,
               parent_id uuid, content text)
LANGUAGE plpgsql STABLE
AS $$
#variable_conflict use_column
DECLARE
    x record;
BEGIN
    IF node.id IS NULL THEN
        RAISE EXCEPTION 'hrag: argument "id" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT n.id, n.document_id, d.source, d.collection, n.depth, n.heading_path, n.title, n.kind,
           n.subtree_tokens, n.child_count, n.parent_id, n.seq, n.subtree_end
      INTO x
      FROM hrag.nodes n
      JOIN hrag.documents d ON d.id = n.document_id
     WHERE n.id = node.id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    node_id := x.id; document_id := x.document_id; source := x.source; collection := x.collection;
    depth := x.depth; heading_path := x.heading_path; title := x.title; kind := x.kind;
    token_count := x.subtree_tokens; child_count := x.child_count; parent_id := x.parent_id;
    -- a statement of its own (Citus: one shard), as in hrag.node_text
    content := hrag._subtree_text(x.document_id, x.seq, x.subtree_end);
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION hrag.node(uuid) IS
    'One node with the columns of hrag.outline, its parent and its full text (no row for an unknown id)';
