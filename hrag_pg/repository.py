"""The repository: the sync data path, the only module that writes documents and nodes.

Other modules touch hrag's tables too, each for one purpose: the SQL
statements of the read path live in :mod:`hrag_pg.queries` (shared with the
async reads of :mod:`hrag_pg.async_repository`), the ones this module sends
to write and administer in :mod:`hrag_pg.statements`; :mod:`hrag_pg.migrate`,
:mod:`hrag_pg.schema_sql` and the Alembic environment create and check the
schema; :mod:`hrag_pg.db` reads ``hrag.config`` to check the installation.

Writes follow the consistency rules listed under "Guarantees" in the README:

* a document's whole tree and all its embeddings are written in **one
  transaction** (upsert the document row, delete its old nodes, COPY the new
  ones), so a crash leaves the previous version intact and nothing partial;
* the document row is upserted ON CONFLICT (id): the id is uuid5 of
  (collection, source), so the primary key keeps sources unique, also on
  Citus where documents are distributed by id and a UNIQUE (collection,
  source) cannot exist (see sql/tables.sql and sql/distribution.sql);
* writers of the same (collection, source) are serialised by a transaction
  advisory lock; writers of different sources never wait for each other;
* children whose embedded text is unchanged keep their stored embedding
  (matched by content hash), so editing one paragraph re-embeds one paragraph.

Reads call the SQL functions in ``sql/`` — one round trip per retrieval.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg
import sqlalchemy as sa
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from sqlalchemy.engine import Engine

from . import collection_model, migrate, queries, statements
from .argument_limits import check_node_id
from .db import connection_error, operational_error, reconnect_failed, unpinged_checkout
from .embedding import Embedder, ModelIdentity, check_vectors, identity_of
from .errors import (
    ConfigurationError,
    ConnectionLost,
    EmbeddingError,
    HragError,
    IngestError,
    SchemaError,
    from_database,
)
from .ingest.flatten import FILE_PATH_KEY, FlatDocument
from .models import IngestResult, Node
from .statements import NODE_SHAPE_COLUMNS, NODE_TEXT_COLUMNS, NODE_TYPES

#: Progress callback: (stage, done, total).
Progress = Callable[[str, int, int], None]

#: Rows per COPY chunk: progress is reported (and ``after_chunk`` called) after each.
COPY_CHUNK = 2000


def _text_values(n: Any, *, json: bool = False) -> tuple[Any, ...]:
    """A node's values of ``NODE_TEXT_COLUMNS``, in their order."""
    return (n.kind, n.title, list(n.heading_path), n.content, n.token_count, n.content_hash,
            Jsonb(n.metadata) if json else n.metadata, n.subtree_tokens, n.separator)


def _comparable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    kind, title, heading_path, content, token_count, content_hash, metadata, subtree_tokens, separator = values
    return (kind, title, list(heading_path or []), content, token_count, content_hash, metadata, subtree_tokens,
            separator)


def _same_shape(doc: FlatDocument, old_rows: dict[uuid.UUID, tuple[Any, ...]]) -> bool:
    """Same node ids, each with the same parent, depth, position and pre-order range."""
    if len(old_rows) != len(doc.nodes):
        return False
    for n in doc.nodes:
        old = old_rows.get(n.id)
        if old is None or old[:len(NODE_SHAPE_COLUMNS)] != (n.parent_id, n.depth, n.position, n.seq,
                                                            n.subtree_end, n.child_count):
            return False
    return True


def _interrupt_behind(exc: BaseException) -> BaseException | None:
    """The Ctrl-C (or exit) that an error was raised while handling, if any.

    Interrupted mid-statement, a connection still has a command in progress,
    so the rollback that follows fails ("another command is already in
    progress"); that error must not turn the interrupt into a failed call.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (KeyboardInterrupt, SystemExit)):
            return seen
        seen = seen.__context__
    return None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _driver(conn: sa.Connection) -> psycopg.Connection:
    driver = conn.connection.driver_connection
    assert isinstance(driver, psycopg.Connection)
    return driver


#: Advisory lock key held during a bulk load ("hrag" + "bulk").
BULK_LOCK_KEY = 0x68726167_62756C6B
#: How long a second bulk load waits for the first before it fails.
BULK_LOCK_WAIT = "10s"


class Repository:
    """All database access for one hrag installation (one database)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._dim: int | None = None
        self._has_model_records: bool | None = None

    def _records_models(self, conn: sa.Connection) -> bool:
        """Whether the schema records collection models (revision 0025 on; the migration tests write
        documents at earlier revisions through this class)."""
        if self._has_model_records is None:
            self._has_model_records = bool(conn.execute(sa.text(statements.COLLECTION_MODELS_TABLE_EXISTS)).scalar())
        return self._has_model_records

    # ------------------------------------------------------------ installation

    def embedding_dim(self) -> int:
        if self._dim is None:
            from .db import installed_embedding_dim

            with self._reading() as conn:  # (a server that is down: one clear error, as for any read)
                self._dim = installed_embedding_dim(conn)
        return self._dim

    def check_ready(self, embedder_dim: int | None = None) -> None:
        """Migrated to head, and (if given) the embedder's dimension matches the database's."""
        with self._reading() as conn:
            current = migrate.current_revision(conn)
        head = migrate.head_revision()
        if current != head:
            raise SchemaError(
                f"The database's hrag schema is at revision {current or 'none'}, this hrag-pg needs {head}: "
                "run `hrag migrate`."
            )
        if embedder_dim is not None and embedder_dim != self.embedding_dim():
            raise EmbeddingError(
                f"The embedding model makes {embedder_dim}-dimensional vectors but this database stores "
                f"{self.embedding_dim()} dimensions; use a matching model or migrate a new database with "
                f"--embedding-dim {embedder_dim}."
            )

    # ------------------------------------------------------------------ writes

    @staticmethod
    def _lock_source(conn: sa.Connection, collection: str, source: str) -> None:
        conn.execute(sa.text(statements.LOCK_SOURCE), {"key": f"hrag\x1f{collection}\x1f{source}"})

    def write_document(
        self,
        doc: FlatDocument,
        embedder: Embedder,
        *,
        progress: Progress | None = None,
        after_chunk: Callable[[int], None] | None = None,
        force: bool = False,
        replaces: str | None = None,
    ) -> IngestResult:
        """Replace the stored tree of ``doc.source`` by ``doc``, atomically.

        ``after_chunk`` is called with the number of rows written so far after
        each COPY chunk (tests use it to inject a failure half-way).  With
        ``force`` an unchanged document is rewritten anyway (repairing, say,
        a missing embedding), still reusing every stored embedding it can.
        ``replaces`` renames: the document stored under that source (same
        collection) lends its embeddings and is deleted in the same
        transaction, so the rename is all or nothing and re-embeds nothing
        whose text is unchanged.
        """
        started = time.perf_counter()
        with self._writing() as conn:
            for source in sorted({doc.source} | ({replaces} if replaces else set())):  # fixed order: no deadlock
                self._lock_source(conn, doc.collection, source)
            dim = self.embedding_dim()
            if embedder.dim != dim:
                raise EmbeddingError(
                    f"The embedding model makes {embedder.dim}-dimensional vectors but this database stores "
                    f"{dim} dimensions; nothing was written."
                )
            # the collection's model, recorded by its first write: another model is refused here
            if self._records_models(conn):
                collection_model.claim(conn, doc.collection, identity_of(embedder))
            if replaces is not None and replaces != doc.source:
                result = self._write_locked(conn, doc, embedder, dim, progress, after_chunk, True, started,
                                            lend_from=replaces)
                conn.execute(sa.text(statements.DELETE_SOURCE), {"c": doc.collection, "s": replaces})
                return result
            return self._write_locked(conn, doc, embedder, dim, progress, after_chunk, force, started)

    def _write_locked(self, conn: sa.Connection, doc: FlatDocument, embedder: Embedder, dim: int,
                      progress: Progress | None, after_chunk: Callable[[int], None] | None, force: bool,
                      started: float, lend_from: str | None = None) -> IngestResult:
        """The body of :meth:`write_document`, inside its transaction and locks."""
        existing, stored_metadata = conn.execute(sa.text(statements.DOCUMENT_HASH_AND_METADATA),
                                                 {"id": doc.id}).first() or (None, None)
        if existing == doc.content_hash and not force:
            if stored_metadata != json.loads(_json(doc.metadata)):  # only the recorded file moved (FILE_PATH_KEY)
                conn.execute(sa.text(statements.UPDATE_DOCUMENT_METADATA),
                             {"id": doc.id, "metadata": _json(doc.metadata)})
            return IngestResult(
                source=doc.source, collection=doc.collection, document_id=doc.id, status="unchanged",
                nodes=len(doc.nodes), embedded=0, reused=len(doc.search_targets),
                seconds=time.perf_counter() - started,
            )

        stored: dict[str, np.ndarray] = {}
        old_rows: dict[uuid.UUID, tuple[Any, ...]] = {}
        unembedded: set[uuid.UUID] = set()  # stored rows without an embedding (a repair for --force)
        # (binary=True: the stored embeddings arrive as raw floats; parsing each one's text
        # form took about a third of re-ingesting an edited file)
        if existing is not None:
            for row in _driver(conn).execute(statements.STORED_NODES, (doc.id,), binary=True):
                old_rows[row[0]] = row[1:-1]
                if row[-1] is not None:
                    stored[row[len(NODE_SHAPE_COLUMNS) + NODE_TEXT_COLUMNS.index("content_hash") + 1]] = row[-1]
                else:
                    unembedded.add(row[0])
        if lend_from is not None:
            # Embeddings keyed by the hash of the embedded text (heading path + content, not the
            # source name), so a renamed document's unchanged children keep theirs.
            for content_hash, embedding in _driver(conn).execute(statements.LENT_EMBEDDINGS,
                                                                 (doc.collection, lend_from), binary=True):
                stored.setdefault(content_hash, embedding)

        targets = doc.search_targets
        missing = list(dict.fromkeys(n.embed_text for n in targets
                                     if n.embed_text is not None and n.content_hash not in stored))
        vectors = self._embed(embedder, missing, dim, progress)
        fresh = dict(zip(missing, vectors, strict=True))

        conn.execute(
            sa.text(statements.UPSERT_DOCUMENT),
            {"id": doc.id, "collection": doc.collection, "source": doc.source, "title": doc.title,
             "hash": doc.content_hash, "metadata": _json(doc.metadata)},
        )
        if old_rows and _same_shape(doc, old_rows):
            # Same nodes in the same places: rewrite only the rows whose text changed,
            # so unchanged children keep their rows and their HNSW entries.
            self._update_changed(conn, doc, old_rows, stored, fresh, unembedded)
        else:
            conn.execute(sa.text(statements.DELETE_DOCUMENT_NODES), {"id": doc.id})
            self._copy_nodes(conn, doc, stored, fresh, progress, after_chunk)
        # The lexical statistics (IDF) change with the rows, in the same transaction.
        conn.execute(sa.text(statements.REFRESH_DOCUMENT_TERMS), {"id": doc.id})

        return IngestResult(
            source=doc.source, collection=doc.collection, document_id=doc.id,
            status="updated" if existing is not None else "created",
            nodes=len(doc.nodes), embedded=len(missing), reused=len(targets) - len(missing),
            seconds=time.perf_counter() - started,
        )

    @staticmethod
    def _update_changed(conn: sa.Connection, doc: FlatDocument, old_rows: dict[uuid.UUID, tuple[Any, ...]],
                        stored: dict[str, np.ndarray], fresh: dict[str, np.ndarray],
                        unembedded: set[uuid.UUID]) -> None:
        shape = len(NODE_SHAPE_COLUMNS)
        # A search target whose stored row lost its embedding is rewritten even if its text is
        # unchanged: that is what `hrag ingest --force` repairs.
        changed = [n for n in doc.nodes if _text_values(n) != _comparable(old_rows[n.id][shape:])
                   or (n.embed_text is not None and n.id in unembedded)]
        if not changed:
            return
        rows = []
        for n in changed:
            embedding = None
            if n.embed_text is not None:
                embedding = stored.get(n.content_hash)
                if embedding is None:
                    embedding = fresh[n.embed_text]
            rows.append((*_text_values(n, json=True), embedding, doc.id, n.id))
        with _driver(conn).cursor() as cur:
            cur.executemany(statements.UPDATE_NODE_TEXT, rows)

    @staticmethod
    def _embed(embedder: Embedder, texts: list[str], dim: int, progress: Progress | None) -> list[np.ndarray]:
        if not texts:
            return []
        # (write_document refused a model of another dimension before the transaction wrote anything)
        # Any Embedder may be plugged in, so its output is checked here, before the COPY:
        # NaN/inf, a wrong number of rows or a wrong width would otherwise fail half-way
        # through the write (or, with too few rows, as a KeyError).
        model = str(getattr(embedder, "model_name", type(embedder).__name__))
        out: list[np.ndarray] = []
        batch = 256
        for start in range(0, len(texts), batch):
            chunk = texts[start:start + batch]
            vectors = check_vectors(embedder.embed(chunk), len(chunk), model=model)
            if vectors.shape[1] != dim:
                raise EmbeddingError(
                    f"Embedding model {model} returned {vectors.shape[1]}-dimensional vectors but this "
                    f"database stores {dim} dimensions; nothing was written."
                )
            out.extend(vectors)
            if progress:
                progress("embed", min(start + batch, len(texts)), len(texts))
        return out

    @staticmethod
    def _copy_nodes(
        conn: sa.Connection, doc: FlatDocument, stored: dict[str, np.ndarray], fresh: dict[str, np.ndarray],
        progress: Progress | None, after_chunk: Callable[[int], None] | None,
    ) -> None:
        total = len(doc.nodes)
        with _driver(conn).cursor() as cur:
            # Under row-level security, COPY goes to a temporary table first (see statements.py).
            rls = cur.execute(statements.NODES_ROW_SECURITY_ACTIVE).fetchone()[0]  # type: ignore[index]
            copy_nodes = statements.COPY_NODES
            if rls:
                cur.execute(statements.CREATE_STAGED_NODES)
                copy_nodes = statements.COPY_STAGED_NODES
            with cur.copy(copy_nodes) as copy:
                copy.set_types(list(NODE_TYPES))
                for i, n in enumerate(doc.nodes, start=1):
                    embedding = None
                    if n.embed_text is not None:
                        embedding = stored.get(n.content_hash)
                        if embedding is None:
                            embedding = fresh[n.embed_text]
                    copy.write_row((
                        n.id, doc.id, doc.collection, n.parent_id, n.depth, n.position, n.kind, n.title,
                        n.heading_path, n.content, n.token_count, n.child_count, n.seq, n.subtree_end,
                        n.content_hash, embedding, Jsonb(n.metadata), n.subtree_tokens, n.separator,
                    ))
                    if i % COPY_CHUNK == 0 or i == total:
                        if progress:
                            progress("write", i, total)
                        if after_chunk:
                            after_chunk(i)
            if rls:
                cur.execute(statements.INSERT_STAGED_NODES)

    def write_rows_only(self, doc: FlatDocument, vectors: dict[str, np.ndarray]) -> None:
        """Write a document whose embeddings are precomputed (benchmarks of the write path)."""
        with self.engine.begin() as conn:
            self._lock_source(conn, doc.collection, doc.source)
            conn.execute(
                sa.text(statements.UPSERT_DOCUMENT_HASH),
                {"id": doc.id, "c": doc.collection, "s": doc.source, "t": doc.title, "h": doc.content_hash},
            )
            conn.execute(sa.text(statements.DELETE_DOCUMENT_NODES), {"id": doc.id})
            self._copy_nodes(conn, doc, {}, vectors, None, None)
            conn.execute(sa.text(statements.REFRESH_DOCUMENT_TERMS), {"id": doc.id})

    @contextmanager
    def vector_index_suspended(self, *, maintenance_work_mem: str = "1GB") -> Iterator[None]:
        """Drop the HNSW index for a bulk load and rebuild it afterwards (even on failure).

        Maintaining HNSW costs about a millisecond per inserted vector here,
        which dominates bulk writes; building the index once at the end is
        several times faster.  The index covers every collection: while
        suspended, every search of the database still works but scans
        sequentially; DROP INDEX briefly takes an exclusive lock on the table
        and the rebuild holds writers back: use it for initial loads, not on a
        busy shared database.  A load killed before the rebuild leaves no
        index; the next one (or ``repair_integrity``) builds the schema's.
        """
        # One bulk load at a time: a second one would find the index already dropped (and
        # rebuild it while the first still loads).  It waits up to BULK_LOCK_WAIT, then fails clearly.
        lock = self.engine.connect()
        try:
            lock.execute(sa.text(statements.SET_LOCK_TIMEOUT), {"t": BULK_LOCK_WAIT})
            try:
                lock.execute(sa.text(statements.LOCK_BULK_LOAD), {"k": BULK_LOCK_KEY})
            except sa.exc.OperationalError as exc:
                raise IngestError(
                    f"another bulk load is running on this database (waited {BULK_LOCK_WAIT}); "
                    "run bulk loads one after another, or ingest without --bulk"
                ) from exc
            lock.commit()
            with self.engine.begin() as conn:
                # The index as it is (its definition is rebuilt as it was), or none: a bulk load that
                # was killed before rebuilding it leaves none, and this one rebuilds the schema's.
                definition = conn.execute(sa.text(statements.VECTOR_INDEX_DEFINITION)).scalar_one()
                # ... or an invalid one (a rebuild that was interrupted): useless, and in the way.
                conn.execute(sa.text(statements.DROP_INVALID_VECTOR_INDEXES))
                conn.execute(sa.text(statements.DROP_VECTOR_INDEX))
            try:
                yield
            finally:
                with self.engine.begin() as conn:
                    conn.execute(sa.text(statements.SET_MAINTENANCE_WORK_MEM), {"m": maintenance_work_mem})
                    conn.execute(sa.text(statements.SET_PARALLEL_MAINTENANCE_WORKERS))
                    conn.execute(sa.text(definition or statements.CREATE_VECTOR_INDEX))
                # Fresh statistics right away: until autovacuum analyzes the table, the planner
                # misjudges the freshly loaded rows and retrieval is several times slower.
                with self.engine.begin() as conn:
                    conn.execute(sa.text(statements.ANALYZE_TABLES))
        finally:
            with contextlib.suppress(sa.exc.SQLAlchemyError):
                lock.execute(sa.text(statements.UNLOCK_BULK_LOAD), {"k": BULK_LOCK_KEY})
                lock.commit()
            lock.close()

    def vector_index_state(self, *, default: str | None = None) -> str:
        """valid, invalid (an interrupted build) or missing (a bulk load killed before its rebuild).

        With ``default``, that is the answer when the database cannot be asked
        (a connection lost, say) instead of an exception.
        """
        try:
            with self._reading() as conn:
                return str(conn.execute(sa.text(statements.VECTOR_INDEX_STATE)).scalar_one())
        except (sa.exc.SQLAlchemyError, HragError):
            if default is None:
                raise
            return default

    def delete_source(self, source: str, collection: str = "default") -> bool:
        """Delete a document and its whole tree; False if there was none."""
        with self._writing() as conn:
            self._lock_source(conn, collection, source)
            deleted = conn.execute(sa.text(statements.DELETE_SOURCE_RETURNING_ID),
                                   {"c": collection, "s": source}).fetchall()
        return bool(deleted)

    # ------------------------------------------------------------------- reads

    def sources(self, collection: str | None = None) -> list[dict[str, Any]]:
        """What is stored: source, collection, document id, node count, last update, metadata."""
        return self.fetch(statements.SOURCES, {"c": collection})

    def file_paths(self, collection: str) -> dict[str, str]:
        """The file each document of ``collection`` was ingested from, where one was recorded."""
        rows = self.fetch(statements.FILE_PATHS, {"c": collection, "k": FILE_PATH_KEY})
        return {r["source"]: r["file_path"] for r in rows if r["file_path"]}

    def collections_of(self, source: str) -> list[str]:
        """The collections holding a document named ``source`` (for "not in that collection" errors)."""
        rows = self.fetch(statements.COLLECTIONS_OF_SOURCE, {"s": source})
        return [r["collection"] for r in rows]

    @contextmanager
    def _reading(self, *, ping: bool = True) -> Iterator[sa.Connection]:
        """A pooled connection for one read, with driver failures as clear errors.

        Failing to connect is a ConfigurationError naming the server; failing
        during the call (server restart, terminated backend, statement_timeout,
        a cancel request) is ConnectionLost or QueryCancelled.  A connection the
        failure broke is invalidated so the pool drops it quietly (and the
        ConnectionLost says so: ``dead_connection``); the next pinged checkout
        reconnects.  ``ping=False`` takes the pooled connection without the
        ping's round trip, for a caller that repeats its statement when the
        connection turns out dead (:meth:`fetch`).
        """
        url = self.engine.url.render_as_string(hide_password=False)
        try:
            with unpinged_checkout() if not ping else contextlib.nullcontext():
                conn = self.engine.connect()
        except sa.exc.OperationalError as exc:
            raise connection_error(url, exc) from exc
        with conn:
            try:
                yield conn
            except (psycopg.OperationalError, sa.exc.OperationalError) as exc:
                dead = conn.invalidated
                if not dead:
                    driver = conn.connection.dbapi_connection
                    if driver is None or driver.closed or getattr(driver, "broken", False):
                        conn.invalidate()
                        dead = True
                raise operational_error(url, exc, dead_connection=dead) from exc
            except (KeyboardInterrupt, SystemExit):
                # Interrupted mid-statement (Ctrl-C), the connection still has a command in
                # progress: returned to the pool, its reset would fail and log a traceback.
                if not conn.invalidated:
                    conn.invalidate()
                raise

    @contextmanager
    def _writing(self) -> Iterator[sa.Connection]:
        """One write transaction, with driver failures translated as :meth:`_reading` does.

        A connection lost mid-write (server restart, terminated backend) rolls
        the transaction back on the server, so the caller gets ConnectionLost
        with the previous version intact; ingest of several files reports the
        file as failed and goes on with the next (the pinged checkout reconnects).
        """
        with self._reading() as conn:
            try:
                with conn.begin():
                    yield conn
            except (psycopg.OperationalError, sa.exc.OperationalError) as exc:
                # The COPY runs on the driver connection, so SQLAlchemy's rollback on the broken
                # connection fails again ("the connection is lost"): report the first failure.
                first: BaseException = exc
                while isinstance(first.__context__, (psycopg.OperationalError, sa.exc.OperationalError)):
                    first = first.__context__
                interrupt = _interrupt_behind(exc)
                raise (interrupt or first) from None

    def fetch(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One read statement, in autocommit and without a ping: one round trip.

        No BEGIN and ROLLBACK around it, and no ping of the pooled connection
        first.  A pooled connection can have died since its last use (the
        server restarted, its backend was terminated); then the statement runs
        once more on a pinged connection, which a read allows.  If that one
        cannot connect, the caller gets the first failure and why reconnecting
        failed (a server that is down, say).
        """
        try:
            return self._fetch_once(sql, params, ping=False)
        except ConnectionLost as lost:
            if not lost.dead_connection:
                raise
            first = lost
        try:
            return self._fetch_once(sql, params, ping=True)
        except ConfigurationError as unreachable:
            raise reconnect_failed(first, str(unreachable)) from None

    def _fetch_once(self, sql: str, params: dict[str, Any], *, ping: bool) -> list[dict[str, Any]]:
        with self._reading(ping=ping) as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            try:
                with _driver(conn).cursor(row_factory=dict_row) as cur:
                    rows = cur.execute(sql, params).fetchall()
            except psycopg.errors.DataError as exc:
                raise from_database(exc) from exc
        return rows

    def collection_models(self, collections: Sequence[str] | None = None) -> dict[str, ModelIdentity]:
        """The recorded model of each given collection (all visible ones for None), read as any read is."""
        with self._reading() as conn:
            return collection_model.recorded(conn, collections)

    def node_text(self, node_id: uuid.UUID) -> str | None:
        node_id = check_node_id(node_id)
        with self._reading() as conn:
            return conn.execute(sa.text(statements.NODE_TEXT), {"id": node_id}).scalar()

    def get_node(self, node_id: uuid.UUID) -> Node | None:
        node_id = check_node_id(node_id)
        with self._reading() as conn:
            row = conn.execute(sa.text(statements.NODE_BY_ID), {"id": node_id}).mappings().first()
        return Node(**row) if row else None

    def children(self, node_id: uuid.UUID) -> list[Node]:
        node_id = check_node_id(node_id)
        with self._reading() as conn:
            rows = conn.execute(sa.text(statements.CHILD_NODES), {"id": node_id}).mappings().all()
        return [Node(**row) for row in rows]

    def check_integrity(self) -> list[dict[str, Any]]:
        """Problems found by ``hrag.check_integrity()`` (empty when healthy)."""
        return self.fetch(statements.INTEGRITY_PROBLEMS, {})

    def repair_integrity(self) -> dict[str, int]:
        """Recompute child counts, ordering ranges and depths; returns how many were fixed per kind."""
        with self._writing() as conn:
            rows = conn.execute(sa.text(statements.REPAIR_INTEGRITY)).all()
        return {problem: int(fixed) for problem, fixed in rows}

    def collections(self) -> list[str]:
        """The collections this role can see (row-level security applies), sorted."""
        return [r["collection"] for r in self.fetch(queries.COLLECTIONS, {})]

    def stats(self) -> dict[str, Any]:
        with self._reading() as conn:
            per_collection = conn.execute(sa.text(statements.COLLECTION_STATS)).mappings().all()
            size = conn.execute(sa.text(statements.STORED_BYTES)).scalar()
            models = collection_model.recorded(conn)
        return {
            "embedding_dim": self.embedding_dim(),
            "collections": [{**dict(r), "model": collection_model.as_json(models[r["collection"]])
                             if r["collection"] in models else None} for r in per_collection],
            "total_bytes": int(size or 0),
        }
