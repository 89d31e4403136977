-- Revision 0017: hrag check --repair per document (hrag._repair_document),
-- every statement filtered by its document, so it works on Citus; also
-- 'broken_ordering' counts only documents whose ranges changed.
-- Current definitions: hrag_pg/sql/integrity.sql;
-- reasoning: docs/decisions.md, "Distributable keys; Citus-only conversions happen in hrag.distribute()".

CREATE FUNCTION hrag._repair_document(doc uuid)
RETURNS TABLE (wrong_child_count bigint, broken_ordering bigint, wrong_depth bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n_counts  bigint;
    n_depth   bigint;
    n_order   bigint;
    ids       uuid[];
    new_seqs  integer[];
    new_ends  integer[];
    new_depths integer[];
BEGIN
    -- child_count, the hit-ratio denominator: what the rows say
    UPDATE hrag.nodes n
       SET child_count = c.actual
      FROM (SELECT p.id, count(k.id) AS actual
              FROM hrag.nodes p
              LEFT JOIN hrag.nodes k ON k.document_id = doc AND k.parent_id = p.id
             WHERE p.document_id = doc
             GROUP BY p.id) AS c
     WHERE n.document_id = doc AND n.id = c.id AND n.child_count <> c.actual;
    GET DIAGNOSTICS n_counts = ROW_COUNT;

    -- The tree walked in sibling order (position, then id for ties), numbered
    -- in pre-order; subtree_end from the count of descendants, depth from the
    -- count of ancestors.
    WITH RECURSIVE walk AS (
        SELECT n.id, ARRAY[n.id] AS ancestors,
               ARRAY[lpad(n.position::text, 10, '0') || n.id::text] AS sort_path
          FROM hrag.nodes n
         WHERE n.document_id = doc AND n.parent_id IS NULL
        UNION ALL
        SELECT c.id, w.ancestors || c.id, w.sort_path || (lpad(c.position::text, 10, '0') || c.id::text)
          FROM walk w
          JOIN hrag.nodes c ON c.document_id = doc AND c.parent_id = w.id
    ),
    numbered AS (
        SELECT w.*, (row_number() OVER (ORDER BY w.sort_path) - 1)::int AS new_seq FROM walk w
    ),
    renumbered AS (
        SELECT x.id, x.new_seq, cardinality(x.ancestors) - 1 AS new_depth,
               x.new_seq + (SELECT count(*) FROM numbered y WHERE x.id = ANY (y.ancestors) AND y.id <> x.id)::int
                   AS new_end
          FROM numbered x
    )
    SELECT array_agg(r.id), array_agg(r.new_seq), array_agg(r.new_end), array_agg(r.new_depth)
      INTO ids, new_seqs, new_ends, new_depths
      FROM renumbered r;

    -- Depths first, in one statement: the parent FK (NO ACTION) is checked
    -- when it ends, and later updates re-check the FK of the rows they touch.
    UPDATE hrag.nodes n
       SET depth = r.new_depth
      FROM unnest(ids, new_depths) AS r(id, new_depth)
     WHERE n.document_id = doc AND n.id = r.id AND n.depth <> r.new_depth;
    GET DIAGNOSTICS n_depth = ROW_COUNT;

    SELECT count(*) INTO n_order
      FROM hrag.nodes n
      JOIN unnest(ids, new_seqs, new_ends) AS r(id, new_seq, new_end) ON r.id = n.id
     WHERE n.document_id = doc AND (n.seq <> r.new_seq OR n.subtree_end <> r.new_end);
    IF n_order > 0 THEN
        -- Two steps so the (document_id, seq) unique constraint holds throughout.
        UPDATE hrag.nodes n
           SET seq = n.seq + 1000000000, subtree_end = n.seq + 1000000000
         WHERE n.document_id = doc AND n.id = ANY (ids);
        UPDATE hrag.nodes n
           SET seq = r.new_seq, subtree_end = r.new_end
          FROM unnest(ids, new_seqs, new_ends) AS r(id, new_seq, new_end)
         WHERE n.document_id = doc AND n.id = r.id;
    END IF;

    RETURN QUERY SELECT n_counts, least(n_order, 1), n_depth;
END
$$;

COMMENT ON FUNCTION hrag._repair_document(uuid) IS
    'internal: recompute one document''s child counts, pre-order ranges and depths (every statement on its shard), not part of the API';

-- Only the owner repairs (as hrag.repair_integrity).
REVOKE ALL ON FUNCTION hrag._repair_document(uuid) FROM PUBLIC;

-- repair_integrity: the vector index as before; trees per document.
CREATE OR REPLACE FUNCTION hrag.repair_integrity()
RETURNS TABLE (problem text, fixed bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n_counts bigint := 0;
    n_order  bigint := 0;
    n_depth  bigint := 0;
    n_index  bigint := 0;
    doc      uuid;
    fixed_in record;
BEGIN
    IF hrag._vector_index_state() <> 'valid' THEN
        DROP INDEX IF EXISTS hrag.nodes_embedding_hnsw_idx;
        -- an invalid index under another name: drop every non-valid HNSW index on nodes
        PERFORM hrag._drop_invalid_vector_indexes();
        PERFORM hrag._create_vector_index();
        n_index := 1;
    END IF;

    FOR doc IN SELECT DISTINCT c.document_id
                 FROM hrag.check_integrity() c
                WHERE c.problem IN ('wrong_child_count', 'broken_ordering', 'wrong_depth')
                  AND c.document_id IS NOT NULL
                ORDER BY c.document_id LOOP
        SELECT * INTO fixed_in FROM hrag._repair_document(doc);
        n_counts := n_counts + fixed_in.wrong_child_count;
        n_order := n_order + fixed_in.broken_ordering;
        n_depth := n_depth + fixed_in.wrong_depth;
    END LOOP;

    RETURN QUERY VALUES ('vector_index', n_index), ('wrong_child_count', n_counts),
                        ('broken_ordering', n_order), ('wrong_depth', n_depth);
END
$$;

-- A reader role may not repair: grant_reader revokes this function too.
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
    EXECUTE format('REVOKE EXECUTE ON FUNCTION hrag.repair_integrity(), hrag._repair_document(uuid), '
                   'hrag.grant_reader(name), hrag.create_tenant_role(name, text[], boolean) FROM %I', role_name);
END
$$;
