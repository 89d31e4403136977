"""The Python facade: connect, ingest, retrieve; it chooses the embedding models and hands the work to the
operations (:attr:`HRAG.reader`, :attr:`HRAG.writer`, :attr:`HRAG.administration`).

    from hrag_pg import HRAG

    hrag = HRAG.open()                       # HRAG_DATABASE_URL, or the embedded server
    hrag.ingest(["docs/"], collection="manuals")
    for r in hrag.parent_child("How do I ...?"):
        print(r.heading_path, r.score, r.content)

Each retrieval embeds the question once and makes one call of a SQL function
(with a reranker: one call for the candidates and their texts, one for the merge).
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from typing_extensions import Self, Unpack

from . import collection_model, db, defaults, migrate, queries
from .argument_limits import MAX_QUESTION_CHARS, check_node_id, check_question  # noqa: F401 - public: hrag_pg.api is where the API reference documents them
from .async_repository import AsyncRepository
from .embedders import embedder_for
from .embedding import (
    Embedder,
    ModelIdentity,
    canonical_name,
    configured_model,
    embed_queries,
    identity_of,
    model_choice,
)
from .errors import ModelMismatchError, unknown_collection
from .ingest.children import QuestionGenerator
from .ingest.pipeline import IngestOptions, Strategy
from .ingest.text import TextFormat
from .ingest.tree import DocumentTree
from .models import ChildChunk, Context, IngestResult, OutlineEntry, OutlineNode, ParentChunk, RetrievalResult
from .operations.administration import Administration
from .operations.reading import AsyncReader, Reader
from .operations.shapes import SourceEntry
from .operations.writing import IngestModels, IngestReport, Rename, TextItem, Writer, model_key
from .reembed import ReembedReport
from .repository import Progress, Repository
from .retrievers import BaseRetriever, Reads, retriever_for
from .settings import AutoMergeSettings, BudgetSettings, Options, ParentChildSettings, Settings, for_method, scoped

#: Questions embedded at once in this process: one per core.  More threads (a server's concurrent
#: requests) only take turns on the same cores and each waits longer (bench/serve_load.py).
_EMBEDDING_SLOTS = threading.BoundedSemaphore(os.cpu_count() or 1)
#: How long a process trusts the collection -> model records it read for questions (see HRAG._query_models).
MODEL_RECORD_SECONDS = 5.0
#: Default weight of lexical term overlap in the hybrid score (kept for callers; see :mod:`hrag_pg.defaults`).
DEFAULT_LEXICAL_WEIGHT = defaults.LEXICAL_WEIGHT


class HRAG:
    """One hrag installation: a database plus an embedding model."""

    def __init__(
        self,
        url: str | None = None,
        *,
        embedder: Embedder | None = None,
        model: str | None = None,
        check: bool = True,
    ) -> None:
        self.url = db.resolve_url(url)
        db.check_reachable(self.url)
        self.repository = Repository(db.engine(self.url))
        self._embedder = embedder
        self._model = canonical_name(model) if model else None
        self._dimension_checked: set[int] = set()
        self._model_records: dict[str | None, tuple[float, dict[str, ModelIdentity]]] = {}
        self._async_repository: AsyncRepository | None = None
        #: The revision :meth:`open` upgraded the schema from (None: it was at head, or not installed
        #: yet), so a caller can say so: an operator who rolled back should hear of the upgrade.
        self.upgraded_from: str | None = None
        if check:
            self.repository.check_ready()

    @classmethod
    def open(cls, url: str | None = None, *, migrate_schema: bool = True, **kwargs: Any) -> HRAG:
        """Connect, migrating the schema to head first if it is behind (the usual entry point).

        At head nothing is migrated, so roles without CREATE (readers, tenants)
        can open an installed database; a schema behind head is migrated, which
        needs the owner's privileges (the error says so).
        """
        resolved = db.resolve_url(url)
        db.check_reachable(resolved)
        upgraded_from: str | None = None
        if migrate_schema:
            with db.engine(resolved).connect() as conn:
                current = migrate.current_revision(conn)
            if current != migrate.head_revision():
                migrate.upgrade(resolved)
                upgraded_from = current
        # (migrated, it is at head: the constructor need not read the revision again)
        hrag = cls(resolved, **{"check": not migrate_schema, **kwargs})
        hrag.upgraded_from = upgraded_from
        return hrag

    # ------------------------------------------------------------- embedding

    @property
    def model(self) -> str | None:
        """The model every collection must use (``model=`` or ``HRAG_EMBEDDING_MODEL``), or None.

        With None each collection uses the model it recorded, and a new
        collection gets one from the script of its first documents
        (:func:`hrag_pg.embedding.model_for_texts`).
        """
        return self._model or configured_model()

    @property
    def embedder(self) -> Embedder:
        """The embedder given or named, else the bundled MiniLM (a collection may record another model)."""
        return self._checked(self._embedder or embedder_for(self.model))

    def _checked(self, embedder: Embedder) -> Embedder:
        """``embedder``, once its dimension was found to be the installation's."""
        if id(embedder) not in self._dimension_checked:
            self.repository.check_ready(embedder.dim)
            self._dimension_checked.add(id(embedder))
        return embedder

    def _asked_embedder(self) -> Embedder | None:
        if self._embedder is not None:
            return self._embedder
        return embedder_for(self.model) if self.model else None

    def collection_models(self, collection: str | None = None) -> dict[str, ModelIdentity]:
        """The model each collection (or the one given) recorded, by collection name."""
        return self.repository.collection_models([collection] if collection is not None else None)

    def _query_models(self, collection: str | None) -> dict[str, ModelIdentity]:
        """:meth:`collection_models` for questions, remembered for :data:`MODEL_RECORD_SECONDS`.

        A question is then one round trip, as the SQL functions promise; a
        reembed finished by another process is seen within that time (one by
        this object at once).
        """
        now = time.monotonic()
        cached = self._model_records.get(collection)
        if cached is not None and now - cached[0] < MODEL_RECORD_SECONDS:
            return cached[1]
        records = self.collection_models(collection)
        self._model_records[collection] = (now, records)
        return records

    def query_embedder(self, collection: str | None = None) -> Embedder:
        """The embedder for questions to ``collection`` (every visible collection for None).

        It is the collection's recorded model; a model given or named that is
        not that model is refused, and so is a question to several collections
        recorded with different models.
        """
        records = self._query_models(collection)
        if collection is not None and collection not in records:
            existing = self.repository.collections()  # (a typo costs this round trip, not a model's load)
            if collection not in existing:
                raise unknown_collection(collection, existing)
        asked = self._asked_embedder()
        if asked is not None:
            identity = identity_of(asked)
            for name, stored in records.items():
                if not stored.matches(identity):
                    raise collection_model.mismatch(name, stored, identity, "query")
            return self._checked(asked)
        models = {stored: name for name, stored in records.items()}
        if not models:
            return self.embedder
        if len(models) > 1:
            described = ", ".join(f"{name!r} ({stored.name})" for stored, name in sorted(
                models.items(), key=lambda item: item[1]))
            raise ModelMismatchError(
                f"the collections {described} were embedded with different models, so one question cannot "
                "search them together; ask one collection at a time (--collection)")
        stored, name = next(iter(models.items()))
        embedder = embedder_for(stored.name)
        if not identity_of(embedder).matches(stored):
            raise ModelMismatchError(
                f"collection {name!r} was embedded with {stored.describe()}, but {stored.name} here is "
                f"{identity_of(embedder).describe()}; install the model the collection was embedded with, "
                f"or switch it with `hrag reembed -c {name} --model {stored.name}`")
        return self._checked(embedder)

    def ingest_embedder(self, collection: str, sample: Callable[[], Sequence[str]] = list,
                        on_model: Callable[[str, str], None] | None = None) -> Embedder:
        """The embedder that writes to ``collection``: the one asked for, the one it recorded, or for a new
        collection the default for the script of ``sample()`` (its first documents' text).

        ``on_model(model, why)`` hears the choice before any file is read (the CLI's first line).
        """
        asked = self._asked_embedder()
        stored = self.collection_models(collection).get(collection)
        if asked is not None:
            self._checked(asked)  # a dimension the installation cannot store is the first thing to say
            # refused here, once, rather than for every file (the write checks again, in its transaction)
            if stored is not None and not stored.matches(identity_of(asked)):
                raise collection_model.mismatch(collection, stored, identity_of(asked), "ingest")
            if on_model is not None:
                on_model(identity_of(asked).name, "the model asked for (--model or HRAG_EMBEDDING_MODEL)")
            return asked
        if stored is not None:
            name, why = stored.name, f"the model collection {collection!r} is embedded with"
        else:
            name, reason = model_choice(sample())
            why = f"a new collection: {reason}"
        if on_model is not None:
            on_model(name, why)
        return self._checked(embedder_for(name))

    def embed_question(self, question: str, collection: str | None = None) -> queries.Stamped:
        """The question's vector for a retrieval in ``collection``, stamped with the model that made it;
        asked of every collection when they were embedded with different models, one vector per
        collection (the question embedded once per model), which the modes search collection by
        collection and merge on their calibrated scores (docs/modes.md, "Several models").

        The statements check the stamp against the collections' records in the snapshot they search
        (``hrag._checked_collection``): the records this object remembers may be a few seconds old.
        """
        if collection is None and self._asked_embedder() is None:
            by_model: dict[ModelIdentity, list[str]] = {}
            for name, stored in self._query_models(None).items():
                by_model.setdefault(stored, []).append(name)
            if len(by_model) > 1:
                vectors: dict[str, np.ndarray] = {}
                stamps: dict[str, tuple[str, str]] = {}
                for names in by_model.values():
                    embedder = self.query_embedder(names[0])
                    vector = self._embed_with(embedder, question)
                    vectors.update((name, vector) for name in names)
                    stamps.update((name, _stamp(embedder)) for name in names)
                return queries.Stamped(vectors, stamps)
        embedder = self.query_embedder(collection)
        return queries.Stamped(self._embed_with(embedder, question), _stamp(embedder))

    def _embed_with(self, embedder: Embedder, question: str) -> np.ndarray:
        check_question(question)
        with _EMBEDDING_SLOTS:
            return np.asarray(embed_queries(embedder, [question])[0], dtype=np.float32)

    def embed_query(self, question: str, collection: str | None = None) -> np.ndarray:
        check_question(question)
        return self._embed_with(self.query_embedder(collection), question)

    # ------------------------------------------------------------- ingestion

    # ------------------------------------------------------------- writing

    @property
    def writer(self) -> Writer:
        """The writing operations (:mod:`hrag_pg.operations.writing`) on this installation, with its model
        choice (:meth:`ingest_embedder`)."""
        return Writer(self.repository, IngestModels(
            choose=self.ingest_embedder, named=lambda name: embedder_for(canonical_name(name)),
            default=lambda: self.embedder, checked=self._checked, changed=self._model_records.clear))

    def ingest(self, paths: Iterable[str | Path], *, collection: str = "default",
               options: IngestOptions | None = None, progress: Progress | None = None,
               question_generator: QuestionGenerator | None = None, stop_on_error: bool = False,
               force: bool = False, bulk: bool = False, metadata: dict[str, Any] | None = None,
               source: str | None = None, on_file: Callable[[Path, int, int], None] | None = None,
               replace: bool = False,
               on_done: Callable[[Path, IngestResult | None, str | None], None] | None = None,
               on_model: Callable[[str, str], None] | None = None) -> IngestReport:
        """Ingest files and directories, one transaction per document (:meth:`Writer.ingest
        <hrag_pg.operations.writing.Writer.ingest>` says how files are named, skipped and replaced)."""
        return self.writer.ingest(paths, collection=collection, options=options, progress=progress,
                                  question_generator=question_generator, stop_on_error=stop_on_error, force=force,
                                  bulk=bulk, metadata=metadata, source=source, on_file=on_file, replace=replace,
                                  on_done=on_done, on_model=on_model)

    def ingest_text(self, text: str, *, source: str, collection: str = "default",
                    metadata: dict[str, Any] | None = None, strategy: Strategy | None = None,
                    format: TextFormat = "markdown", options: IngestOptions | None = None,
                    force: bool = False) -> IngestResult:
        """Ingest a string as the document ``source`` (:meth:`Writer.ingest_text
        <hrag_pg.operations.writing.Writer.ingest_text>`)."""
        return self.writer.ingest_text(text, source=source, collection=collection, metadata=metadata,
                                       strategy=strategy, format=format, options=options, force=force)

    def ingest_texts(self, items: Iterable[TextItem | tuple[str, str] | tuple[str, str, dict[str, Any] | None]],
                     *, collection: str = "default", strategy: Strategy | None = None,
                     format: TextFormat = "markdown", options: IngestOptions | None = None, force: bool = False,
                     progress: Progress | None = None) -> IngestReport:
        """Ingest many ``(text, source[, metadata])`` items, each checked before any is written
        (:meth:`Writer.ingest_texts <hrag_pg.operations.writing.Writer.ingest_texts>`)."""
        return self.writer.ingest_texts(items, collection=collection, strategy=strategy, format=format,
                                        options=options, force=force, progress=progress)

    def ingest_tree(self, tree: DocumentTree, *, collection: str = "default", options: IngestOptions | None = None,
                    progress: Progress | None = None) -> IngestResult:
        """Ingest a tree built by your own parser (or one of ours)."""
        return self.writer.ingest_tree(tree, collection=collection, options=options, progress=progress)

    def rename_from_paths(self, paths: Iterable[str | Path], *, collection: str = "default", dry_run: bool = False,
                          options: IngestOptions | None = None) -> list[Rename]:
        """Move documents ingested under the old naming to today's names, reusing their embeddings
        (:meth:`Writer.rename_from_paths <hrag_pg.operations.writing.Writer.rename_from_paths>`)."""
        return self.writer.rename_from_paths(paths, collection=collection, dry_run=dry_run, options=options)

    def reembed(self, collection: str, model: str | Embedder, *, progress: Progress | None = None) -> ReembedReport:
        """Switch ``collection`` to another embedding model in place, readers seeing one model or the other
        (:meth:`Writer.reembed <hrag_pg.operations.writing.Writer.reembed>`)."""
        return self.writer.reembed(collection, model, progress=progress)

    def cancel_reembed(self, collection: str) -> bool:
        """Forget an unfinished reembed of ``collection``; False if none was under way."""
        return self.writer.cancel_reembed(collection)

    # ------------------------------------------------------------- reading

    def node_text(self, node_id: Any) -> str | None:
        """Full text of any node (its own text plus its descendants', document order)."""
        return self.repository.node_text(node_id)

    def parent_chunk(self, node_id: Any) -> ParentChunk | None:
        """Any node as a :class:`ParentChunk`: its full text and its children's ids (None if unknown).

        Handy to expand a ``matched_children`` id or a search hit's parent by hand.
        """
        node = self.repository.get_node(node_id)
        if node is None:
            return None
        return ParentChunk(id=node.id, doc_id=node.document_id, title=node.title,
                           content=self.repository.node_text(node.id) or "",
                           child_ids=[c.id for c in self.repository.children(node.id)], metadata=node.metadata)

    def child_chunks(self, parent_id: Any) -> list[ChildChunk]:
        """The children of a node as :class:`ChildChunk` (own text, no embedding), in document order."""
        return [ChildChunk(id=c.id, parent_id=c.parent_id, doc_id=c.document_id, content=c.content,
                           metadata=c.metadata) for c in self.repository.children(parent_id)]

    def delete(self, source: str, collection: str = "default") -> bool:
        """Delete a source and its whole tree; False if it was not stored."""
        return self.repository.delete_source(source, collection)

    def outline(self, collection: str | None = None, source: str | None = None,
                max_depth: int = 3) -> list[OutlineEntry]:
        """The heading tree of the stored documents, down to ``max_depth``, in document order.

        One collection (or all), or one ``source``; each entry is a node a
        reader navigates by (the root, sections, titled leaves) with its
        subtree's token count.  Expand one with :meth:`children`, read one
        with :meth:`node`.  An unknown source is an :class:`InvalidArgument`, an unknown
        collection :class:`NotFound` naming those that exist.
        """
        return self.reader.outline(collection, source, max_depth)

    def children(self, node_id: Any) -> list[OutlineEntry]:
        """The children of a node in document order (paragraphs included); [] for a leaf or an unknown id."""
        rows = self.repository.fetch(queries.CHILDREN, {"node_id": check_node_id(node_id)})
        return [queries.to_outline_entry(r) for r in rows]

    def node(self, node_id: Any) -> OutlineNode | None:
        """One node with its place in the tree and its full text (None if unknown)."""
        rows = self.repository.fetch(queries.NODE, {"node_id": check_node_id(node_id)})
        return queries.to_outline_node(rows[0]) if rows else None

    def sources(self, collection: str | None = None) -> list[SourceInfo]:
        """The stored documents (all collections, or one): source, collection, nodes, last update, and the
        collection's model; an unknown collection is :class:`NotFound` naming those that exist."""
        return self.reader.sources(collection)

    # ------------------------------------------------------------- retrieval

    @property
    def reads(self) -> Reads:
        """What retrievers read through: the question's vector, token counts, one statement (sync or async)."""
        return Reads(embed_query=self.embed_question,
                     fetch=self.repository.fetch, afetch=lambda sql, params: self.async_repository.fetch(sql, params),
                     models_changed=self._model_records.clear)

    def retriever(self, settings: Settings) -> BaseRetriever[Any]:
        """The retriever of the mode ``settings`` describe, on this installation."""
        return retriever_for(self.reads, settings)

    @property
    def reader(self) -> Reader:
        """The reading operations (:mod:`hrag_pg.operations`) on this installation, as the CLI runs them."""
        return Reader(self.repository, self.retriever)

    @property
    def administration(self) -> Administration:
        """The administration operations (stats, check) on this installation."""
        return Administration(self.repository)

    def parent_child(self, question: str, settings: ParentChildSettings | None = None,
                     **options: Unpack[Options]) -> list[RetrievalResult]:
        """Small-to-big: the parents of the best-matching children (see :class:`ParentChildSettings`)."""
        return self.retriever(for_method(ParentChildSettings, settings, "parent_child", **options)).retrieve(question)

    def auto_merge(self, question: str, settings: AutoMergeSettings | None = None,
                   **options: Unpack[Options]) -> list[RetrievalResult]:
        """Hit leaves, merged upward into parents enough of whose children were hit (see :class:`AutoMergeSettings`)."""
        return self.retriever(for_method(AutoMergeSettings, settings, "auto_merge", **options)).retrieve(question)

    def retrieve(self, question: str, settings: BudgetSettings | None = None,
                 **options: Unpack[Options]) -> list[RetrievalResult]:
        """The budget mode: the best non-overlapping context within ``max_tokens`` (see :class:`BudgetSettings`)."""
        return self.retriever(for_method(BudgetSettings, settings, "retrieve", **options)).retrieve(question)

    def context(self, question: str, settings: Settings | None = None, **options: Unpack[Options]) -> Context:
        """The results of the mode ``settings`` describe (default parent-child) within ``max_tokens``,
        with what was dropped or replaced to fit."""
        return self.retriever(scoped(settings or ParentChildSettings(), **options)).context(question)

    # ------------------------------------------------------------- lifetime

    @property
    def async_repository(self) -> AsyncRepository:
        """The async reads of this installation, on their own connection pool (opened on first use)."""
        if self._async_repository is None:
            self._async_repository = AsyncRepository(self.url)
        return self._async_repository

    def close(self) -> None:
        """Close the idle pooled connections (the engine is shared per URL and reconnects on use)."""
        self.repository.engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: One stored document, as ``hrag sources`` lists it (the operations' shape).
SourceInfo = SourceEntry


def _stamp(embedder: Embedder) -> tuple[str, str]:
    """What hrag._checked_collection compares with a collection's record: the model's name and fingerprint."""
    identity = identity_of(embedder)
    return identity.name, identity.fingerprint


class AsyncHRAG:
    """The facade for asyncio applications: the same retrievals, budget and ingestion.

    Retrievals run on a ``psycopg_pool.AsyncConnectionPool`` (one connection
    per concurrent call); the query embedding, the reranker and ingestion
    (CPU-bound) run in worker threads so the event loop stays free.  The
    settings are the same objects as :class:`HRAG`'s (:mod:`hrag_pg.settings`).

        async with await AsyncHRAG.open() as hrag:
            results = await hrag.auto_merge("...", collection="manuals")
    """

    def __init__(self, hrag: HRAG) -> None:
        self.hrag = hrag
        self.repository = hrag.async_repository

    @classmethod
    async def open(cls, url: str | None = None, **kwargs: Any) -> AsyncHRAG:
        return cls(await asyncio.to_thread(HRAG.open, url, **kwargs))

    async def connect(self) -> None:
        """Open the connection pool now (a server does it at start), not on the first question."""
        await self.repository.pool()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def embed_query(self, question: str, collection: str | None = None) -> np.ndarray:
        return await asyncio.to_thread(self.hrag.embed_query, question, collection)

    def retriever(self, settings: Settings) -> BaseRetriever[Any]:
        return self.hrag.retriever(settings)

    @property
    def reader(self) -> AsyncReader:
        """The reading operations on the connection pool, as the server runs them."""
        return AsyncReader(self.hrag.reader, self.repository)

    async def parent_child(self, question: str, settings: ParentChildSettings | None = None,
                           **options: Unpack[Options]) -> list[RetrievalResult]:
        """As :meth:`HRAG.parent_child`, on the connection pool."""
        settings = for_method(ParentChildSettings, settings, "parent_child", **options)
        return await self.retriever(settings).aretrieve(question)

    async def auto_merge(self, question: str, settings: AutoMergeSettings | None = None,
                         **options: Unpack[Options]) -> list[RetrievalResult]:
        """As :meth:`HRAG.auto_merge`, on the connection pool."""
        settings = for_method(AutoMergeSettings, settings, "auto_merge", **options)
        return await self.retriever(settings).aretrieve(question)

    async def retrieve(self, question: str, settings: BudgetSettings | None = None,
                       **options: Unpack[Options]) -> list[RetrievalResult]:
        """As :meth:`HRAG.retrieve` (the budget mode), on the connection pool."""
        return await self.retriever(for_method(BudgetSettings, settings, "retrieve", **options)).aretrieve(question)

    async def context(self, question: str, settings: Settings | None = None, **options: Unpack[Options]) -> Context:
        """As :meth:`HRAG.context`, on the connection pool."""
        return await self.retriever(scoped(settings or ParentChildSettings(), **options)).acontext(question)

    async def outline(self, collection: str | None = None, source: str | None = None,
                      max_depth: int = 3) -> list[OutlineEntry]:
        """As :meth:`HRAG.outline`, on the connection pool."""
        return await self.reader.outline(collection, source, max_depth)

    async def children(self, node_id: Any) -> list[OutlineEntry]:
        """As :meth:`HRAG.children`, on the connection pool."""
        rows = await self.repository.fetch(queries.CHILDREN, {"node_id": check_node_id(node_id)})
        return [queries.to_outline_entry(r) for r in rows]

    async def node(self, node_id: Any) -> OutlineNode | None:
        """As :meth:`HRAG.node`, on the connection pool."""
        rows = await self.repository.fetch(queries.NODE, {"node_id": check_node_id(node_id)})
        return queries.to_outline_node(rows[0]) if rows else None

    async def ingest(self, paths: Iterable[str | Path], **kwargs: Any) -> IngestReport:
        """:meth:`HRAG.ingest` in a worker thread (embedding is CPU-bound; the loop stays responsive)."""
        return await asyncio.to_thread(functools.partial(self.hrag.ingest, list(paths), **kwargs))

    async def close(self) -> None:
        await self.repository.close()
__all__ = [
    "HRAG",
    "AsyncHRAG",
    "IngestReport",
    "Rename",
    "TextItem",
    "check_question",
    "model_key",
]
