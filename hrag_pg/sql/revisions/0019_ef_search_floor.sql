-- Revision 0019: the ANN step searches max(hnsw.ef_search, k, hrag.ef_search)
-- deep, hrag.ef_search 100 by default: at pgvector's 40 the graph lost
-- evidence.  SET hrag.ef_search = 40 gives the old speed back.
-- Current definitions: hrag_pg/sql/search.sql;
-- measurements: docs/decisions.md, "The ANN step searches at least 100 candidates deep".

-- ---------------------------------------------------------------------------
-- hrag._ef_search: the HNSW candidate list search_leaves uses for k hits.
-- ---------------------------------------------------------------------------
CREATE FUNCTION hrag._ef_search(k integer)
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

-- ---------------------------------------------------------------------------
-- hrag.search_leaves: as in revision 0002, at the depth above.
-- ---------------------------------------------------------------------------
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
