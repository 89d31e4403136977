-- Revert revision 0009 on a single node (a distributed installation cannot
-- go back: undistribute its tables first with Citus's undistribute_table).
-- Current definitions: hrag_pg/sql/tables.sql, distribution.sql.

DROP FUNCTION hrag.distribute(integer);
DROP FUNCTION hrag.node_text(uuid, uuid);
DROP FUNCTION hrag._collection_visible(text);
DROP FUNCTION hrag._is_member_of(name);

ALTER TABLE hrag.nodes DROP CONSTRAINT nodes_document_fk;
ALTER TABLE hrag.nodes ADD CONSTRAINT nodes_document_fk FOREIGN KEY (document_id, collection)
    REFERENCES hrag.documents (id, collection) ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE hrag.document_terms DROP CONSTRAINT document_terms_document_id_collection_fkey;
ALTER TABLE hrag.document_terms ADD CONSTRAINT document_terms_document_id_collection_fkey
    FOREIGN KEY (document_id, collection) REFERENCES hrag.documents (id, collection)
    ON DELETE CASCADE ON UPDATE CASCADE;

ALTER TABLE hrag.nodes DROP CONSTRAINT nodes_pkey;
ALTER TABLE hrag.nodes ADD CONSTRAINT nodes_pkey PRIMARY KEY (id);
