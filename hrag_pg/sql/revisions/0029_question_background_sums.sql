-- Revision 0029, after the functions: the old fold goes, and every
-- document's sum of directions is taken from its vectors (the new trigger
-- folds them into hrag.collection_sizes; on Citus the documents are the sums).

DROP FUNCTION hrag._add_collection_sizes(text[], bigint[], bigint[]);

UPDATE hrag.documents d
   SET embedding_sum = s.directions
  FROM (SELECT n.document_id, sum(l2_normalize(n.embedding)) AS directions
          FROM hrag.nodes n
         WHERE n.embedding IS NOT NULL
         GROUP BY n.document_id) AS s
 WHERE s.document_id = d.id;
