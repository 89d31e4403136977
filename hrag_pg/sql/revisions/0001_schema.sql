-- Revision 0001: the schema (hrag.config, hrag.documents, hrag.nodes, indexes).
-- Every level of every tree in one table, text stored once: a node's full text
-- is its subtree's contents in pre-order (seq .. subtree_end), one range scan.
-- Placeholder filled in by the migration: {{embedding_dim}}.
-- Current definitions: hrag_pg/sql/tables.sql;
-- reasoning: docs/decisions.md, "Text stored once: `seq` / `subtree_end` pre-order ranges".

CREATE SCHEMA IF NOT EXISTS hrag;

-- Installation facts the Python side checks before it writes or queries.
-- `created_vector_extension` remembers whether *we* created pgvector, so a
-- downgrade never drops an extension the user had installed before us.
CREATE TABLE hrag.config (
    singleton                boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    embedding_dim            integer NOT NULL CHECK (embedding_dim BETWEEN 1 AND 16000),
    created_vector_extension boolean NOT NULL,
    installed_at             timestamptz NOT NULL DEFAULT now()
);

INSERT INTO hrag.config (embedding_dim, created_vector_extension)
SELECT {{embedding_dim}},
       NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'vector');

CREATE EXTENSION IF NOT EXISTS vector;

COMMENT ON SCHEMA hrag IS 'hrag-pg: hierarchical retrieval (parent-child, auto-merging)';

CREATE TABLE hrag.documents (
    id           uuid PRIMARY KEY,
    collection   text NOT NULL DEFAULT 'default'
                 CHECK (collection <> '' AND length(collection) <= 256),
    source       text NOT NULL CHECK (source <> ''),
    title        text,
    content_hash text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}'::jsonb
                 CHECK (jsonb_typeof(metadata) = 'object'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (collection, source),
    -- target of the composite FK that keeps nodes in their document's collection
    UNIQUE (id, collection)
);

CREATE TABLE hrag.nodes (
    id            uuid PRIMARY KEY,
    document_id   uuid NOT NULL,
    -- Copied from the document (and enforced equal by the FK below) so the
    -- collection filter runs inside the vector index scan, without a join.
    collection    text NOT NULL,
    parent_id     uuid,
    depth         integer NOT NULL CHECK (depth >= 0),
    -- Generated so the FK below can prove depth = parent depth + 1.
    parent_depth  integer GENERATED ALWAYS AS (depth - 1) STORED,
    position      integer NOT NULL CHECK (position >= 0),
    kind          text NOT NULL CHECK (kind ~ '^[a-z][a-z0-9_]*$'),
    title         text,
    heading_path  text[] NOT NULL DEFAULT '{}',
    content       text NOT NULL DEFAULT '',
    token_count   integer NOT NULL DEFAULT 0 CHECK (token_count >= 0),
    -- The hit-ratio denominator: number of direct children.
    child_count   integer NOT NULL DEFAULT 0 CHECK (child_count >= 0),
    -- Pre-order number within the document and the last seq of the subtree.
    seq           integer NOT NULL CHECK (seq >= 0),
    subtree_end   integer NOT NULL,
    content_hash  text NOT NULL,
    embedding     vector({{embedding_dim}}),
    metadata      jsonb NOT NULL DEFAULT '{}'::jsonb
                  CHECK (jsonb_typeof(metadata) = 'object'),
    created_at    timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT nodes_root_has_depth_zero CHECK ((parent_id IS NULL) = (depth = 0)),
    CONSTRAINT nodes_subtree_range_valid CHECK (subtree_end >= seq),
    CONSTRAINT nodes_unique_seq UNIQUE (document_id, seq),
    -- Targets of the self-referencing composite FK.
    CONSTRAINT nodes_id_document_depth_key UNIQUE (id, document_id, depth),
    CONSTRAINT nodes_document_fk FOREIGN KEY (document_id, collection)
        REFERENCES hrag.documents (id, collection) ON DELETE CASCADE ON UPDATE CASCADE,
    -- A parent lives in the same document, one level up; deleting it deletes
    -- the whole subtree.
    CONSTRAINT nodes_parent_fk FOREIGN KEY (parent_id, document_id, parent_depth)
        REFERENCES hrag.nodes (id, document_id, depth) ON DELETE CASCADE
);

COMMENT ON COLUMN hrag.nodes.content IS
    'The node''s own text only; full text = contents of seq..subtree_end in order (hrag.node_text)';
COMMENT ON COLUMN hrag.nodes.child_count IS
    'Number of direct children: the denominator of the auto-merge hit ratio';

-- Parent lookups and sibling order.
CREATE INDEX nodes_parent_idx ON hrag.nodes (parent_id, position);
-- Search targets of one collection: the exact-scan fallback of search_leaves.
CREATE INDEX nodes_collection_idx ON hrag.nodes (collection) WHERE embedding IS NOT NULL;
-- Metadata containment filters.
CREATE INDEX nodes_metadata_idx ON hrag.nodes USING gin (metadata jsonb_path_ops);
CREATE INDEX documents_metadata_idx ON hrag.documents USING gin (metadata jsonb_path_ops);
-- Re-ingestion deletes and re-inserts rows; vacuum early so the HNSW graph
-- does not accumulate dead copies of re-inserted vectors (pgvector loses
-- recall on them until VACUUM).
ALTER TABLE hrag.nodes SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 500);

-- The ANN step: cosine distance over embedded nodes.
CREATE INDEX nodes_embedding_hnsw_idx ON hrag.nodes
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
