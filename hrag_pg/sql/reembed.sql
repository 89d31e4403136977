-- hrag-pg, reembed.sql: hrag.finish_reembed, the last step of `hrag reembed`:
-- the new vectors, prepared beside the old ones in hrag.reembed_nodes
-- (tables.sql) while the collection stays searchable, replace them at once.
-- docs/decisions.md, "A model per collection".
--
-- Each definition is the current one, with what it is for and why it works
-- so; "last changed in revision NNNN" points at its history (revisions/, and
-- the measurements in docs/decisions.md).  To change one: docs/migrations.md.

-- hrag.finish_reembed (last changed in revision 0029)
-- The switch: the prepared vectors replace the old ones for a whole
-- collection at once, or nothing changes, so a search never mixes two
-- models' vectors.  A document written since its vectors were made is
-- refused (they would be of its old text); each document's sum of
-- directions is taken again from its new vectors (the question's background
-- is the new model's from the same commit), and the collection's model row
-- takes the new model.
CREATE OR REPLACE FUNCTION hrag.finish_reembed(collection text) RETURNS bigint
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
DECLARE
    target   jsonb;
    stale    bigint;
    switched bigint;
BEGIN
    -- Writers read this row FOR SHARE in their transaction: taking it FOR
    -- UPDATE waits for them, and makes those after us see the new model.
    SELECT m.next_model INTO target
      FROM hrag.collection_models m WHERE m.collection = finish_reembed.collection FOR UPDATE;
    IF target IS NULL THEN
        RAISE EXCEPTION 'hrag: collection % has no unfinished reembed to finish', finish_reembed.collection
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    SELECT count(*) INTO stale
      FROM hrag.documents d
      LEFT JOIN hrag.reembed_documents r ON r.document_id = d.id
     WHERE d.collection = finish_reembed.collection
       AND (r.document_id IS NULL OR r.document_hash <> d.content_hash
            OR r.fingerprint <> target->>'fingerprint');
    IF stale > 0 THEN
        -- (the caller prepares them and calls again)
        RAISE EXCEPTION 'hrag: % documents of collection % were written since their new vectors were made',
                        stale, finish_reembed.collection
            USING ERRCODE = 'serialization_failure';
    END IF;
    UPDATE hrag.nodes n
       SET embedding = p.embedding, token_count = p.token_count, subtree_tokens = p.subtree_tokens,
           content_hash = p.content_hash
      FROM hrag.reembed_nodes p
     WHERE p.document_id = n.document_id AND p.node_id = n.id AND n.collection = finish_reembed.collection;
    GET DIAGNOSTICS switched = ROW_COUNT;
    UPDATE hrag.documents d
       SET total_tokens = r.total_tokens, content_hash = r.new_document_hash, updated_at = now(),
           embedding_sum = (SELECT sum(l2_normalize(n.embedding)) FROM hrag.nodes n
                             WHERE n.document_id = d.id AND n.embedding IS NOT NULL)
      FROM hrag.reembed_documents r
     WHERE r.document_id = d.id AND d.collection = finish_reembed.collection;
    UPDATE hrag.collection_models m
       SET model = target->>'model', dimension = (target->>'dimension')::integer,
           fingerprint = target->>'fingerprint', query_prompt = target->>'query_prompt',
           passage_prompt = target->>'passage_prompt', recorded_at = now(), next_model = NULL
     WHERE m.collection = finish_reembed.collection;
    DELETE FROM hrag.reembed_documents r WHERE r.collection = finish_reembed.collection;
    RETURN switched;
END
$$;
COMMENT ON FUNCTION hrag.finish_reembed(text) IS
    'Swap in the vectors an unfinished reembed prepared, for the whole collection in one transaction (hrag reembed calls it)';
