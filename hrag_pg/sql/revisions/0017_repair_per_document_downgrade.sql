-- Undo revision 0017: revision 0006's hrag.repair_integrity and revision 0007's
-- hrag.grant_reader, verbatim; hrag._repair_document dropped.
-- Current definitions: hrag_pg/sql/integrity.sql.

CREATE OR REPLACE FUNCTION hrag.repair_integrity()
RETURNS TABLE (problem text, fixed bigint)
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    n_counts bigint;
    n_order  bigint;
    n_depth  bigint;
    n_index  bigint := 0;
BEGIN
    IF hrag._vector_index_state() <> 'valid' THEN
        DROP INDEX IF EXISTS hrag.nodes_embedding_hnsw_idx;
        -- an invalid index under another name: drop every non-valid HNSW index on nodes
        PERFORM hrag._drop_invalid_vector_indexes();
        PERFORM hrag._create_vector_index();
        n_index := 1;
    END IF;

    UPDATE hrag.nodes n
       SET child_count = coalesce(c.actual, 0)
      FROM hrag.nodes m
      LEFT JOIN (SELECT parent_id, count(*) AS actual FROM hrag.nodes GROUP BY parent_id) c
             ON c.parent_id = m.id
     WHERE n.id = m.id AND n.child_count <> coalesce(c.actual, 0);
    GET DIAGNOSTICS n_counts = ROW_COUNT;

    -- Renumber documents whose ranges or depths disagree: walk each tree in
    -- sibling order (position, then id for ties), number in pre-order, count
    -- descendants for subtree_end and ancestors for depth.
    CREATE TEMP TABLE hrag_renumber ON COMMIT DROP AS
    WITH RECURSIVE bad AS (
        SELECT DISTINCT c.document_id FROM hrag.check_integrity() c
         WHERE c.problem IN ('broken_ordering', 'wrong_depth')
    ),
    walk AS (
        SELECT n.id, n.document_id, ARRAY[n.id] AS ancestors,
               ARRAY[lpad(n.position::text, 10, '0') || n.id::text] AS sort_path
          FROM hrag.nodes n JOIN bad USING (document_id)
         WHERE n.parent_id IS NULL
        UNION ALL
        SELECT c.id, c.document_id, w.ancestors || c.id,
               w.sort_path || (lpad(c.position::text, 10, '0') || c.id::text)
          FROM walk w JOIN hrag.nodes c ON c.parent_id = w.id
    ),
    numbered AS (
        SELECT w.*, (row_number() OVER (PARTITION BY w.document_id ORDER BY w.sort_path) - 1)::int AS new_seq
          FROM walk w
    )
    SELECT x.id, x.document_id, x.new_seq, cardinality(x.ancestors) - 1 AS new_depth,
           x.new_seq + (SELECT count(*) FROM numbered y WHERE x.id = ANY (y.ancestors) AND y.id <> x.id)::int
               AS new_end
      FROM numbered x;

    -- Depths first, in one statement: the parent FK (NO ACTION) is checked
    -- when it ends, and later updates re-check the FK of the rows they touch.
    UPDATE hrag.nodes n
       SET depth = r.new_depth
      FROM hrag_renumber r
     WHERE n.id = r.id AND n.depth <> r.new_depth;
    GET DIAGNOSTICS n_depth = ROW_COUNT;

    -- Two steps so the (document_id, seq) unique constraint holds throughout.
    UPDATE hrag.nodes n
       SET seq = n.seq + 1000000000, subtree_end = n.seq + 1000000000
      FROM hrag_renumber r
     WHERE n.id = r.id;
    UPDATE hrag.nodes n
       SET seq = r.new_seq, subtree_end = r.new_end
      FROM hrag_renumber r
     WHERE n.id = r.id;
    SELECT count(DISTINCT r.document_id) INTO n_order FROM hrag_renumber r;

    RETURN QUERY VALUES ('vector_index', n_index), ('wrong_child_count', n_counts),
                        ('broken_ordering', n_order), ('wrong_depth', n_depth);
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

DROP FUNCTION hrag._repair_document(uuid);
