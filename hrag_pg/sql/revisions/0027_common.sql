-- hrag-pg, common.sql: what every retrieval mode shares: the argument checks
-- (a clear error naming the argument, never a wrong answer), the numeric
-- hrag.* settings that tune the modes, and the document of each hit, which the
-- per-document steps of text.sql, parent_child.sql, merge.sql and budget.sql
-- route by on Citus.
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag._setting (last changed in revision 0014)
-- A numeric hrag.* setting (SET hrag.auto_min_lift = 3), or its default when
-- unset.  A setting that is not a number is refused by name, since a bare
-- cast error would not say which setting is wrong.
CREATE OR REPLACE FUNCTION hrag._setting(name text, default_value double precision)
RETURNS double precision
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    raw text := nullif(btrim(current_setting(name, true)), '');
BEGIN
    IF raw IS NULL THEN
        RETURN default_value;
    END IF;
    -- (a pattern, not an EXCEPTION block: that would open a subtransaction on every call)
    IF raw !~ '^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$' THEN
        RAISE EXCEPTION 'hrag: setting % must be a number, got %', name, quote_literal(raw)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN raw::double precision;
END
$$;
COMMENT ON FUNCTION hrag._setting(text, double precision) IS 'internal: a numeric hrag.* setting or its default, not part of the API';

-- hrag._check_query (last changed in revision 0002)
-- Argument checks shared by the search functions.  Errors name the argument
-- and use invalid_parameter_value, so a caller can tell them from a fault.
CREATE OR REPLACE FUNCTION hrag._check_query(query vector, filter jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF query IS NULL THEN
        RAISE EXCEPTION 'hrag: argument "query" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF vector_dims(query) <> {{embedding_dim}} THEN
        RAISE EXCEPTION 'hrag: argument "query" has % dimensions, but this installation stores % (hrag.config.embedding_dim)',
            vector_dims(query), {{embedding_dim}}
            USING ERRCODE = 'data_exception';
    END IF;
    IF vector_norm(query) = 0 THEN
        RAISE EXCEPTION 'hrag: argument "query" is the zero vector; cosine similarity is undefined for it'
            USING ERRCODE = 'data_exception';
    END IF;
    IF filter IS NOT NULL AND jsonb_typeof(filter) <> 'object' THEN
        RAISE EXCEPTION 'hrag: argument "filter" must be a JSON object, got a JSON %', jsonb_typeof(filter)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION hrag._check_query(vector, jsonb) IS 'internal: argument check, not part of the API';

-- hrag._check_count (last changed in revision 0002)
-- A count argument (k, max_parents, ...) between 1 and max_value: a larger
-- one would make a search or a climb scan without bound.
CREATE OR REPLACE FUNCTION hrag._check_count(value integer, name text, max_value integer DEFAULT 1000)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF value IS NULL OR value <= 0 OR value > max_value THEN
        RAISE EXCEPTION 'hrag: argument "%" must be between 1 and %, got %', name, max_value, coalesce(value::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$$;
COMMENT ON FUNCTION hrag._check_count(integer, text, integer) IS 'internal: argument check, not part of the API';

-- hrag._check_hits (last changed in revision 0002)
-- Hits given by a caller (the *_hits functions): ids and scores of the same
-- length, without NULLs, so the modes never silently drop a hit.
CREATE OR REPLACE FUNCTION hrag._check_hits(node_ids uuid[], scores real[])
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF node_ids IS NULL OR scores IS NULL THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" and "scores" must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF cardinality(node_ids) <> cardinality(scores) THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" (% elements) and "scores" (% elements) must have the same length',
            cardinality(node_ids), cardinality(scores)
            USING ERRCODE = 'array_subscript_error';
    END IF;
    IF array_position(node_ids, NULL) IS NOT NULL OR array_position(scores, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'hrag: arguments "node_ids" and "scores" must not contain NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hrag._check_hits(uuid[], real[]) IS 'internal: argument check, not part of the API';

-- hrag._check_threshold (last changed in revision 0002)
-- Auto-merge's threshold: a share of children, so between 0 and 1.
CREATE OR REPLACE FUNCTION hrag._check_threshold(merge_threshold real)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF merge_threshold IS NULL OR merge_threshold <= 0 OR merge_threshold > 1 OR merge_threshold = 'NaN' THEN
        RAISE EXCEPTION 'hrag: argument "merge_threshold" must be in (0, 1], got %', coalesce(merge_threshold::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN true;
END
$$;
COMMENT ON FUNCTION hrag._check_threshold(real) IS 'internal: argument check, not part of the API';

-- hrag._document_ids (last changed in revision 0010)
-- The document of each node id (NULL for an unknown id), in array order.
-- The *_hits functions take bare node ids; this is their one lookup by id
-- (on Citus a query to every shard, by the id index), after which every
-- step knows its document and reads one shard.
CREATE OR REPLACE FUNCTION hrag._document_ids(node_ids uuid[])
RETURNS uuid[]
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    found_ids  uuid[];
    found_docs uuid[];
BEGIN
    SELECT array_agg(n.id), array_agg(n.document_id) INTO found_ids, found_docs
      FROM hrag.nodes n
     WHERE n.id = ANY (node_ids);
    RETURN ARRAY(SELECT (SELECT f.doc FROM unnest(found_ids, found_docs) AS f(id, doc)
                          WHERE f.id = h.id ORDER BY f.doc LIMIT 1)
                   FROM unnest(node_ids) WITH ORDINALITY AS h(id, ord)
                  ORDER BY h.ord);
END
$$;
COMMENT ON FUNCTION hrag._document_ids(uuid[]) IS
    'internal: the document of each node id (NULL if unknown), not part of the API';
