-- hrag-pg revision 0019, downgrade: search_leaves at max(hnsw.ef_search, k) again.
-- Current definitions: hrag_pg/sql/search.sql.

-- As in revision 0002 (with revision 0007's ROWS 30).
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
BEGIN
    PERFORM hrag._check_query(query, filter);
    PERFORM hrag._check_count(k, 'k');
    IF current_setting('hnsw.ef_search')::integer < k THEN
        PERFORM set_config('hnsw.ef_search', k::text, true);
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

DROP FUNCTION hrag._ef_search(integer);
