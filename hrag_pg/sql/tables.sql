-- hrag-pg: the tables, their constraints and indexes, row-level security
-- switched on, and the installation's config row.
--
-- Applied once, by a fresh install (schema_sql.install), after text.sql and
-- lexical.sql (the generated lexical columns of hrag.nodes call their
-- functions) and before the other topic files.  An existing installation got
-- these tables through the revisions in revisions/; a change to a table is a
-- new revision (ALTER TABLE) *and* an edit here, checked equal by
-- tests/migration/test_fresh_install.py.
--
-- One table of nodes holds every level of every tree.  Text is stored once:
-- a node's `content` is only its *own* text (a heading line, a paragraph),
-- and the full text of any node is the ordered concatenation of the contents
-- of its subtree.  Nodes are numbered in document pre-order (`seq`), and
-- each node records the last `seq` of its subtree (`subtree_end`), so that
-- concatenation is one index range scan on (document_id, seq).
--
-- Placeholders filled in by the migration: {{embedding_dim}}.

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

-- One row per ingested source: its collection, source and content_hash (what
-- a re-ingest compares) and its size (search targets, stored tokens) and the
-- sum of its search targets' directions, which the statistics triggers sum
-- per collection.
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
    -- the N of the lexical IDF and the collection's size, summed per
    -- collection into hrag.collection_sizes by the triggers
    search_targets integer NOT NULL DEFAULT 0 CHECK (search_targets >= 0),
    total_tokens   integer NOT NULL DEFAULT 0 CHECK (total_tokens >= 0),
    -- the sum of the search targets' unit vectors (NULL: none), whose mean
    -- per collection places a question's background (hrag._question_background)
    embedding_sum  vector({{embedding_dim}}),
    -- (on Citus, hrag.distribute() turns this into a plain index: ids are
    -- uuid5 of (collection, source), so the primary key keeps it unique)
    UNIQUE (collection, source),
    -- target of the composite FK that keeps nodes in their document's collection
    UNIQUE (id, collection)
);

COMMENT ON COLUMN hrag.documents.search_targets IS
    'Number of embedded nodes of the document (the N of the lexical IDF), kept by hrag.refresh_document_terms';
COMMENT ON COLUMN hrag.documents.total_tokens IS
    'The document''s stored tokens (its root''s subtree_tokens): a collection''s size for hrag.retrieve_hits';
COMMENT ON COLUMN hrag.documents.embedding_sum IS
    'The sum of the document''s search targets'' unit vectors, kept by hrag.refresh_document_terms: a collection''s mean direction';

-- Every node of every tree (the layout is described at the top of this
-- file).  The primary key leads with document_id, the Citus distribution
-- column, so every per-document step reads one shard; leaves carry the
-- embedding and the generated lexical columns the candidate stage searches.
CREATE TABLE hrag.nodes (
    id            uuid NOT NULL,
    -- the distribution column on Citus: every per-document step filters on it
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
    -- The exact text between the previous node with content and this one, so
    -- the full text comes back byte for byte (code, lines split mid-sentence).
    separator     text NOT NULL DEFAULT E'\n\n',
    -- The budget's unit, written by ingestion.
    subtree_tokens integer NOT NULL DEFAULT 0 CHECK (subtree_tokens >= 0),
    -- The lexical channel: the search target's terms and their hashes (what
    -- the GIN index holds: 8 bytes a term instead of the term's text).
    lexical_terms text[]
        GENERATED ALWAYS AS (CASE WHEN embedding IS NOT NULL
                                  THEN hrag.node_lexical_terms(heading_path, content, metadata)
                             END) STORED,
    lexical_hashes bigint[]
        GENERATED ALWAYS AS (CASE WHEN embedding IS NOT NULL
                                  THEN hrag.term_hashes(hrag.node_lexical_terms(heading_path, content, metadata))
                             END) STORED,

    -- (document_id, id): Citus needs the distribution column in every unique key.
    CONSTRAINT nodes_pkey PRIMARY KEY (document_id, id),
    CONSTRAINT nodes_root_has_depth_zero CHECK ((parent_id IS NULL) = (depth = 0)),
    CONSTRAINT nodes_subtree_range_valid CHECK (subtree_end >= seq),
    CONSTRAINT nodes_unique_seq UNIQUE (document_id, seq),
    -- Targets of the self-referencing composite FK.
    CONSTRAINT nodes_id_document_depth_key UNIQUE (id, document_id, depth),
    CONSTRAINT nodes_document_fk FOREIGN KEY (document_id, collection)
        REFERENCES hrag.documents (id, collection) ON DELETE CASCADE,
    -- A parent lives in the same document, one level up; deleting it deletes
    -- the whole subtree.
    CONSTRAINT nodes_parent_fk FOREIGN KEY (parent_id, document_id, parent_depth)
        REFERENCES hrag.nodes (id, document_id, depth) ON DELETE CASCADE
);

COMMENT ON COLUMN hrag.nodes.content IS
    'The node''s own text only; full text = contents of seq..subtree_end joined by their separators (hrag.node_text)';
COMMENT ON COLUMN hrag.nodes.child_count IS
    'Number of direct children: the denominator of the auto-merge hit ratio';
COMMENT ON COLUMN hrag.nodes.separator IS
    'Text between the previous non-empty node (in seq order) and this node''s content in the original document';
COMMENT ON COLUMN hrag.nodes.subtree_tokens IS
    'Tokens of the node''s full text (token_count of its subtree''s nodes with text, plus the separators between them that hold more than whitespace): the unit of hrag.retrieve''s budget';

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

-- The lexical channel: search targets containing a term hash.  fastupdate
-- off: a pending list made every lexical lookup scan it (docs/decisions.md).
CREATE INDEX nodes_lexical_hashes_idx ON hrag.nodes USING gin (lexical_hashes)
    WITH (fastupdate = off) WHERE lexical_hashes IS NOT NULL;

-- ---------------------------------------------------------------------------
-- Lexical statistics (the IDF of search_hybrid): per document, and summed per
-- collection by the triggers of policies_triggers.sql (lexical.sql).
-- ---------------------------------------------------------------------------
CREATE TABLE hrag.document_terms (
    document_id uuid NOT NULL,
    collection  text NOT NULL,
    term        text NOT NULL,
    -- search targets of the document that contain the term
    leaves      integer NOT NULL CHECK (leaves > 0),
    PRIMARY KEY (document_id, term),
    FOREIGN KEY (document_id, collection) REFERENCES hrag.documents (id, collection) ON DELETE CASCADE
);
COMMENT ON TABLE hrag.document_terms IS
    'Per document and lexical term, how many search targets contain it: the collection IDF statistics';
-- A term's document frequency, per collection or overall: an index-only sum.
CREATE INDEX document_terms_term_idx ON hrag.document_terms (term, collection) INCLUDE (leaves);

CREATE TABLE hrag.collection_terms (
    collection text   NOT NULL,
    term       text   NOT NULL,
    leaves     bigint NOT NULL
);
COMMENT ON TABLE hrag.collection_terms IS
    'Per collection and lexical term, how many search targets contain it: the sum of the term''s rows (several while writers overlap), kept from hrag.document_terms by its triggers';
CREATE INDEX collection_terms_term_idx ON hrag.collection_terms (term, collection) INCLUDE (leaves);

CREATE TABLE hrag.collection_sizes (
    collection     text   NOT NULL,
    search_targets bigint NOT NULL,
    total_tokens   bigint NOT NULL,
    embedding_sum  vector({{embedding_dim}})
);
COMMENT ON TABLE hrag.collection_sizes IS
    'Per collection, its search targets (the N of the lexical IDF), stored tokens and the sum of their unit vectors: the sums of its rows, kept from hrag.documents by its triggers';
CREATE INDEX collection_sizes_collection_idx ON hrag.collection_sizes (collection)
    INCLUDE (search_targets, total_tokens);
-- Whoever may read hrag.document_terms may read the sums; on any
-- installation that includes the built-in reader role (tenants and readers
-- get theirs from hrag.grant_reader).
GRANT SELECT ON hrag.collection_terms, hrag.collection_sizes TO pg_read_all_data;

-- ---------------------------------------------------------------------------
-- Tenancy: which roles see which collections (tenancy.sql).
-- ---------------------------------------------------------------------------
CREATE TABLE hrag.tenant_collections (
    role_name  name NOT NULL,
    collection text NOT NULL,
    PRIMARY KEY (role_name, collection)
);
COMMENT ON TABLE hrag.tenant_collections IS
    'Roles bound to collections: a bound role sees only its collections (row-level security)';
-- Every role may read its bindings (the policy shows it only its own).
GRANT SELECT ON hrag.tenant_collections TO PUBLIC;

-- ---------------------------------------------------------------------------
-- Embedding models per collection, and an unfinished reembed (reembed.sql).
-- ---------------------------------------------------------------------------
CREATE TABLE hrag.collection_models (
    collection     text        NOT NULL PRIMARY KEY
                               CHECK (collection <> '' AND length(collection) <= 256),
    model          text        NOT NULL CHECK (model <> ''),
    dimension      integer     NOT NULL CHECK (dimension > 0),
    fingerprint    text        NOT NULL DEFAULT '',
    query_prompt   text        NOT NULL DEFAULT '',
    passage_prompt text        NOT NULL DEFAULT '',
    recorded_at    timestamptz NOT NULL DEFAULT now(),
    -- the model an unfinished hrag reembed switches to (same keys as the columns above)
    next_model     jsonb       CHECK (next_model IS NULL OR jsonb_typeof(next_model) = 'object')
);
COMMENT ON TABLE hrag.collection_models IS
    'Per collection, the embedding model that made its vectors (and the one an unfinished reembed switches to)';

CREATE TABLE hrag.reembed_documents (
    document_id    uuid    NOT NULL PRIMARY KEY REFERENCES hrag.documents (id) ON DELETE CASCADE,
    collection     text    NOT NULL,
    fingerprint    text    NOT NULL,
    -- hrag.documents.content_hash when the new vectors were made: a document
    -- written since is prepared again before the switch
    document_hash  text    NOT NULL,
    -- what the document's hash becomes with the new model (a re-ingest then finds it unchanged)
    new_document_hash text NOT NULL,
    total_tokens   integer NOT NULL CHECK (total_tokens >= 0)
);
COMMENT ON TABLE hrag.reembed_documents IS
    'Documents whose new vectors an unfinished hrag reembed has written (hrag.reembed_nodes)';
CREATE INDEX reembed_documents_collection_idx ON hrag.reembed_documents (collection);

CREATE TABLE hrag.reembed_nodes (
    document_id    uuid    NOT NULL REFERENCES hrag.reembed_documents (document_id) ON DELETE CASCADE,
    node_id        uuid    NOT NULL,
    collection     text    NOT NULL,
    embedding      vector({{embedding_dim}}),
    token_count    integer NOT NULL CHECK (token_count >= 0),
    subtree_tokens integer NOT NULL CHECK (subtree_tokens >= 0),
    content_hash   text    NOT NULL,
    PRIMARY KEY (document_id, node_id)
);
COMMENT ON TABLE hrag.reembed_nodes IS
    'The new vector, token counts and content hash of each node of a prepared document, until hrag.finish_reembed';

-- ---------------------------------------------------------------------------
-- Row-level security on every table (the policies are in policies_triggers.sql).
-- The table owner is exempt (PostgreSQL's rule): ingestion and migrations.
-- ---------------------------------------------------------------------------
ALTER TABLE hrag.documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.nodes ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.document_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.collection_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.collection_sizes ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.tenant_collections ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.collection_models ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.reembed_documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE hrag.reembed_nodes ENABLE ROW LEVEL SECURITY;
