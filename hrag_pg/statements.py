"""The SQL that writes and administers: one home for it, so a write's statements read together.

The repository, the collection-model records and ``hrag reembed`` send these
(with the few small reads that go with them); the read path's statements,
shared by the sync and async repositories, are in :mod:`hrag_pg.queries`.
Parameters are as each caller sends them: ``:name`` for ``sa.text``,
``%s`` / ``%(name)s`` for a psycopg cursor.
"""

from __future__ import annotations

# ------------------------------------------------------------------ node columns

#: The columns a COPY of a document's nodes writes, in the order of its rows ...
NODE_COLUMNS = (
    "id", "document_id", "collection", "parent_id", "depth", "position", "kind", "title",
    "heading_path", "content", "token_count", "child_count", "seq", "subtree_end",
    "content_hash", "embedding", "metadata", "subtree_tokens", "separator",
)
#: ... and their types (COPY in binary format sends no type information of its own).
NODE_TYPES = (
    "uuid", "uuid", "text", "uuid", "int4", "int4", "text", "text",
    "text[]", "text", "int4", "int4", "int4", "int4",
    "text", "vector", "jsonb", "int4", "text",
)
#: The columns that place a node in its tree; if none changes, a rewrite is an in-place update.
NODE_SHAPE_COLUMNS = ("parent_id", "depth", "position", "seq", "subtree_end", "child_count")
#: The columns an in-place update rewrites (in the order of the repository's ``_text_values``).
NODE_TEXT_COLUMNS = ("kind", "title", "heading_path", "content", "token_count", "content_hash", "metadata",
                     "subtree_tokens", "separator")

_NODE_COLUMN_LIST = ", ".join(NODE_COLUMNS)
_MODEL_COLUMNS = "collection, model, dimension, fingerprint, query_prompt, passage_prompt, next_model"

# ------------------------------------------------------------------ locks

# Writers of the same (collection, source) wait for each other, writers of different sources never;
# ``hrag reembed`` takes the same lock for the document it prepares.
LOCK_SOURCE = "SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"

# One bulk load at a time (a session lock, held across the load's transactions).
SET_LOCK_TIMEOUT = "SELECT set_config('lock_timeout', :t, true)"
LOCK_BULK_LOAD = "SELECT pg_advisory_lock(:k)"
UNLOCK_BULK_LOAD = "SELECT pg_advisory_unlock(:k)"

# ------------------------------------------------------------------ documents

# Whether the schema records collection models (revision 0025 on).
COLLECTION_MODELS_TABLE_EXISTS = "SELECT to_regclass('hrag.collection_models') IS NOT NULL"

DOCUMENT_HASH_AND_METADATA = "SELECT content_hash, metadata FROM hrag.documents WHERE id = :id"
UPDATE_DOCUMENT_METADATA = "UPDATE hrag.documents SET metadata = CAST(:metadata AS jsonb) WHERE id = :id"

UPSERT_DOCUMENT = """
INSERT INTO hrag.documents AS d (id, collection, source, title, content_hash, metadata)
VALUES (:id, :collection, :source, :title, :hash, CAST(:metadata AS jsonb))
ON CONFLICT (id) DO UPDATE
   SET title = EXCLUDED.title,
       content_hash = EXCLUDED.content_hash,
       metadata = EXCLUDED.metadata,
       -- the proposed row's default, now(): Citus refuses
       -- non-immutable functions in DO UPDATE SET
       updated_at = EXCLUDED.updated_at
"""

# For benchmarks of the write path (``Repository.write_rows_only``): no metadata.
UPSERT_DOCUMENT_HASH = (
    "INSERT INTO hrag.documents (id, collection, source, title, content_hash) "
    "VALUES (:id, :c, :s, :t, :h) ON CONFLICT (id) DO UPDATE "
    "SET content_hash = EXCLUDED.content_hash"
)

# (the nodes go with the document: ON DELETE CASCADE)
DELETE_SOURCE = "DELETE FROM hrag.documents WHERE collection = :c AND source = :s"
DELETE_SOURCE_RETURNING_ID = "DELETE FROM hrag.documents WHERE collection = :c AND source = :s RETURNING id"

# ------------------------------------------------------------------ nodes

# A document's stored rows: its shape, its text and its embedding (read in binary: raw floats).
STORED_NODES = (
    f"SELECT id, {', '.join(NODE_SHAPE_COLUMNS + NODE_TEXT_COLUMNS)}, embedding "
    "FROM hrag.nodes WHERE document_id = %s"
)

# The embeddings a renamed document lends, keyed by the hash of the embedded text.
LENT_EMBEDDINGS = (
    "SELECT n.content_hash, n.embedding FROM hrag.nodes n JOIN hrag.documents d "
    "ON d.id = n.document_id WHERE d.collection = %s AND d.source = %s "
    "AND n.embedding IS NOT NULL"
)

DELETE_DOCUMENT_NODES = "DELETE FROM hrag.nodes WHERE document_id = :id"

# keyed by (document_id, id): on Citus, each update goes to the one shard holding the document
UPDATE_NODE_TEXT = (
    f"UPDATE hrag.nodes SET {', '.join(f'{c} = %s' for c in NODE_TEXT_COLUMNS)}, embedding = %s "
    "WHERE document_id = %s AND id = %s"
)

# PostgreSQL refuses COPY FROM into a table whose row-level security applies to the current
# user (a tenant role made with can_write): such writers COPY into a temporary table and
# INSERT ... SELECT from it, so the policies' WITH CHECK still judges every row.
NODES_ROW_SECURITY_ACTIVE = "SELECT row_security_active('hrag.nodes')"
CREATE_STAGED_NODES = "CREATE TEMP TABLE hrag_nodes_in (LIKE hrag.nodes INCLUDING DEFAULTS) ON COMMIT DROP"
COPY_NODES = f"COPY hrag.nodes ({_NODE_COLUMN_LIST}) FROM STDIN (FORMAT BINARY)"
COPY_STAGED_NODES = f"COPY hrag_nodes_in ({_NODE_COLUMN_LIST}) FROM STDIN (FORMAT BINARY)"
INSERT_STAGED_NODES = f"INSERT INTO hrag.nodes ({_NODE_COLUMN_LIST}) SELECT {_NODE_COLUMN_LIST} FROM hrag_nodes_in"

REFRESH_DOCUMENT_TERMS = "SELECT hrag.refresh_document_terms(:id)"

# ------------------------------------------------------------------ the vector index (bulk loads)

VECTOR_INDEX_DEFINITION = "SELECT pg_get_indexdef(to_regclass('hrag.nodes_embedding_hnsw_idx'))"
DROP_INVALID_VECTOR_INDEXES = "SELECT hrag._drop_invalid_vector_indexes()"
DROP_VECTOR_INDEX = "DROP INDEX IF EXISTS hrag.nodes_embedding_hnsw_idx"
SET_MAINTENANCE_WORK_MEM = "SELECT set_config('maintenance_work_mem', :m, true)"
SET_PARALLEL_MAINTENANCE_WORKERS = "SELECT set_config('max_parallel_maintenance_workers', '2', true)"
# The schema's index, when there was none to rebuild as it was.
CREATE_VECTOR_INDEX = "SELECT hrag._create_vector_index()"
ANALYZE_TABLES = ("ANALYZE hrag.nodes, hrag.documents, hrag.document_terms, "
                  "hrag.collection_terms, hrag.collection_sizes")
VECTOR_INDEX_STATE = "SELECT hrag._vector_index_state()"

# ------------------------------------------------------------------ integrity

INTEGRITY_PROBLEMS = ("SELECT problem, document_id, node_id, detail FROM hrag.check_integrity() "
                      "ORDER BY problem, document_id, node_id")
REPAIR_INTEGRITY = "SELECT problem, fixed FROM hrag.repair_integrity()"

# ------------------------------------------------------------------ the repository's listings and lookups
# (direct reads of the tables, sync only; the retrieval statements are in queries.py)

SOURCES = (
    "SELECT d.source, d.collection, d.id AS document_id, d.updated_at, d.metadata, "
    "       (SELECT count(*) FROM hrag.nodes n WHERE n.document_id = d.id) AS nodes "
    "  FROM hrag.documents d WHERE %(c)s::text IS NULL OR d.collection = %(c)s::text "
    " ORDER BY d.collection, d.source"
)
FILE_PATHS = (
    "SELECT d.source, d.metadata->>%(k)s AS file_path FROM hrag.documents d "
    " WHERE d.collection = %(c)s AND d.metadata ? %(k)s"
)
COLLECTIONS_OF_SOURCE = "SELECT collection FROM hrag.documents WHERE source = %(s)s ORDER BY collection"
NODE_TEXT = "SELECT hrag.node_text(:id)"
NODE_BY_ID = (
    "SELECT id, document_id, parent_id, collection, depth, position, kind, title, heading_path, "
    "content, token_count, child_count, metadata FROM hrag.nodes WHERE id = :id"
)
CHILD_NODES = (
    "SELECT id, document_id, parent_id, collection, depth, position, kind, title, heading_path, "
    "content, token_count, child_count, metadata FROM hrag.nodes "
    "WHERE parent_id = :id ORDER BY position"
)
COLLECTION_STATS = """
SELECT d.collection,
       count(DISTINCT d.id) AS documents,
       count(n.id) AS nodes,
       count(n.embedding) AS embedded,
       coalesce(sum(length(n.content)), 0) AS characters
  FROM hrag.documents d LEFT JOIN hrag.nodes n ON n.document_id = d.id
 GROUP BY d.collection ORDER BY d.collection
"""
STORED_BYTES = "SELECT pg_total_relation_size('hrag.nodes') + pg_total_relation_size('hrag.documents')"

# ------------------------------------------------------------------ collection models (hrag.collection_models)

# (a collection whose documents were all deleted no longer exists: its record does not count)
RECORDED_MODELS = (
    f"SELECT {_MODEL_COLUMNS} FROM hrag.collection_models m "
    "WHERE (CAST(:c AS text[]) IS NULL OR m.collection = ANY (CAST(:c AS text[]))) "
    "  AND m.collection IN (SELECT d.collection FROM hrag.documents d) ORDER BY m.collection"
)
PENDING_MODEL = "SELECT next_model FROM hrag.collection_models WHERE collection = :c"

COLLECTION_HAS_DOCUMENTS = "SELECT EXISTS (SELECT 1 FROM hrag.documents WHERE collection = :c)"
FORGET_MODEL_OF_EMPTY_COLLECTION = "DELETE FROM hrag.collection_models WHERE collection = :c AND next_model IS NULL"
RECORD_MODEL = (
    "INSERT INTO hrag.collection_models "
    "(collection, model, dimension, fingerprint, query_prompt, passage_prompt) "
    "VALUES (:c, :model, :dimension, :fingerprint, :query_prompt, :passage_prompt) "
    "ON CONFLICT (collection) DO NOTHING"
)
# FOR SHARE: a write and a reembed's switch (hrag.finish_reembed takes it FOR UPDATE) never cross.
CLAIMED_MODEL = f"SELECT {_MODEL_COLUMNS} FROM hrag.collection_models WHERE collection = :c FOR SHARE"

START_MODEL_SWITCH = "UPDATE hrag.collection_models SET next_model = CAST(:t AS jsonb) WHERE collection = :c"
DELETE_PREPARED_COLLECTION = "DELETE FROM hrag.reembed_documents WHERE collection = :c"
CANCEL_MODEL_SWITCH = "UPDATE hrag.collection_models SET next_model = NULL WHERE collection = :c"

# ------------------------------------------------------------------ hrag reembed

# Each document, and whether its new values are already prepared for this model and still current.
REEMBED_DOCUMENTS = (
    "SELECT d.id, d.source, (r.document_id IS NOT NULL AND r.document_hash = d.content_hash "
    "                        AND r.fingerprint = :fp) AS ready "
    "  FROM hrag.documents d LEFT JOIN hrag.reembed_documents r ON r.document_id = d.id "
    " WHERE d.collection = :c ORDER BY d.source"
)
DOCUMENT_HASH_TITLE_AND_METADATA = "SELECT content_hash, title, metadata FROM hrag.documents WHERE id = :id"
REEMBED_SOURCE_NODES = (
    "SELECT id, parent_id, kind, heading_path, content, separator, metadata, seq, subtree_end, "
    "       embedding IS NOT NULL AS is_target, content_hash "
    "  FROM hrag.nodes WHERE document_id = :id ORDER BY seq"
)
# (its prepared nodes go with it: ON DELETE CASCADE)
DELETE_PREPARED_DOCUMENT = "DELETE FROM hrag.reembed_documents WHERE document_id = :id"
INSERT_PREPARED_DOCUMENT = (
    "INSERT INTO hrag.reembed_documents (document_id, collection, fingerprint, document_hash, "
    "new_document_hash, total_tokens) VALUES (:id, :c, :fp, :h, :new, :t)"
)
INSERT_PREPARED_NODES = (
    "INSERT INTO hrag.reembed_nodes (document_id, node_id, collection, embedding, token_count, "
    "subtree_tokens, content_hash) VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
# Swaps the prepared values in for the whole collection and records the new model, in one transaction.
FINISH_REEMBED = "SELECT hrag.finish_reembed(:c)"
