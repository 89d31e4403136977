"""The Python facade: connect, ingest, retrieve.

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
import contextlib
import dataclasses
import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
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
from .errors import HragError, IngestError, ModelMismatchError, NotFound, unknown_collection
from .ingest.children import QuestionGenerator
from .ingest.flatten import FILE_PATH_KEY
from .ingest.loaders import load_document
from .ingest.pipeline import IngestOptions, Strategy, prepare_tree
from .ingest.sources import keep_stored_names, name_files, old_names
from .ingest.text import TextFormat, check_metadata, check_source, load_text
from .ingest.tree import DocumentTree
from .models import ChildChunk, Context, IngestResult, OutlineEntry, OutlineNode, ParentChunk, RetrievalResult
from .operations.administration import Administration
from .operations.reading import AsyncReader, Reader
from .operations.shapes import SourceEntry
from .reembed import Reembedder, ReembedReport
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


@dataclass
class IngestReport:
    """What one ``ingest`` call did: per-file results, skipped and failed files."""

    results: list[IngestResult] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def embedded(self) -> int:
        return sum(r.embedded for r in self.results)

    @property
    def nodes(self) -> int:
        return sum(r.nodes for r in self.results)


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

    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        collection: str = "default",
        options: IngestOptions | None = None,
        progress: Progress | None = None,
        question_generator: QuestionGenerator | None = None,
        stop_on_error: bool = False,
        force: bool = False,
        bulk: bool = False,
        metadata: dict[str, Any] | None = None,
        source: str | None = None,
        on_file: Callable[[Path, int, int], None] | None = None,
        replace: bool = False,
        on_done: Callable[[Path, IngestResult | None, str | None], None] | None = None,
        on_model: Callable[[str, str], None] | None = None,
    ) -> IngestReport:
        """Ingest files and directories; unsupported files are skipped and reported.

        Each document is its own transaction: a bad file is reported in
        ``failed`` (or raised with ``stop_on_error``) and never touches what
        is stored for the others.  ``bulk`` drops the vector index for the
        duration and rebuilds it once at the end (much faster for big
        initial loads; searches of every collection meanwhile fall back to
        sequential scans); bulk loads take a lock so two never run at once,
        end with ANALYZE, and rebuild an index a killed bulk load left missing.
        ``on_file(path, index, total)`` is called before each file is parsed
        (the CLI's status line), ``on_done(path, result, error)`` after it is
        written (``error`` None) or has failed (``result`` None): the CLI's
        per-file lines, and what it reports when interrupted.  ``on_model(model, why)`` hears which
        model writes the collection, and why, before any file is read.

        Source names do not depend on the current directory (see
        :mod:`hrag_pg.ingest.sources`): a file is named by its file name, a
        directory's files by their path relative to it, and ``source`` names
        the one file given or prefixes a directory's names.  Without
        ``source``, a file already stored in ``collection`` under another name
        (``docs/`` stored ``docs/api/auth.md`` as ``api/auth.md``) keeps it, so
        re-ingesting one file of a directory updates its document.  ``metadata`` (a
        JSON object) is stored on every document written, and ``filter``
        matches it.

        Each document records the file it was read from (``file_path`` in its
        metadata).  A file whose name is already stored from *another* file
        that still exists (two directories' ``copyright``, ingested in two
        calls) fails, naming both, instead of silently replacing the other
        document; ``replace=True`` replaces it.  A file that moved (the old
        path is gone) simply updates its document.
        """
        started = time.perf_counter()
        options = options or IngestOptions()
        report = IngestReport()
        paths = list(paths)
        for p in paths:
            if not Path(p).exists():
                raise IngestError(f"{p}: no such file or directory")
        user_metadata = check_metadata(metadata, "--metadata")
        # (with an explicit strategy a file named explicitly is read whatever its extension)
        files, skipped = name_files(paths, source, any_named_file=options.strategy is not None)
        report.skipped = [(str(p), reason) for p, reason in skipped]
        # (chosen, and its dimension checked, before a bulk load touches the index)
        embedder = self.ingest_embedder(collection, lambda: _sample_files(files), on_model)
        stored = self.repository.file_paths(collection)
        if source is None:
            files = keep_stored_names(files, stored)
        stored_from = {} if replace else stored
        with self.repository.vector_index_suspended() if bulk else contextlib.nullcontext():
            self._ingest_files(files, report, collection, embedder, options, progress, question_generator,
                               stop_on_error, force, user_metadata, on_file, stored_from, on_done)
        report.seconds = time.perf_counter() - started
        return report

    def _ingest_files(self, files: list[tuple[Path, str]], report: IngestReport, collection: str,
                      embedder: Embedder, options: IngestOptions, progress: Progress | None,
                      question_generator: QuestionGenerator | None, stop_on_error: bool, force: bool,
                      metadata: dict[str, Any],
                      on_file: Callable[[Path, int, int], None] | None = None,
                      stored_from: dict[str, str] | None = None,
                      on_done: Callable[[Path, IngestResult | None, str | None], None] | None = None) -> None:
        for index, (path, name) in enumerate(files, start=1):
            if on_file:
                on_file(path, index, len(files))
            try:
                file_path = str(path.resolve())
                _refuse_replacing_another_file(path, file_path, name, collection, (stored_from or {}).get(name))
                tree = _load_file(path, name, options)
                result = self._write_tree(tree, collection, embedder, options, progress, question_generator,
                                          force, metadata)
            except HragError as exc:
                if stop_on_error:
                    raise
                report.failed.append((str(path), str(exc)))
                if on_done:
                    on_done(path, None, str(exc))
            else:
                report.results.append(result)
                if on_done:
                    on_done(path, result, None)
            if progress:
                progress("files", index, len(files))

    def _write_tree(self, tree: DocumentTree, collection: str, embedder: Embedder, options: IngestOptions,
                    progress: Progress | None, question_generator: QuestionGenerator | None, force: bool,
                    metadata: dict[str, Any]) -> IngestResult:
        """Refine, flatten and write one parsed document (one transaction)."""
        tree.metadata.update(metadata)  # the user's keys win over hrag's strategy/file_type
        self._model_records.clear()  # (a first write records a model)
        doc = prepare_tree(tree, options, collection=collection, model_name=model_key(embedder),
                           counter=embedder.token_counter, question_generator=question_generator)
        return self.repository.write_document(doc, embedder, progress=progress, force=force)

    def ingest_text(
        self,
        text: str,
        *,
        source: str,
        collection: str = "default",
        metadata: dict[str, Any] | None = None,
        strategy: Strategy | None = None,
        format: TextFormat = "markdown",
        options: IngestOptions | None = None,
        force: bool = False,
    ) -> IngestResult:
        """Ingest a string as the document ``source``: same parsers, ids, locks and re-embedding as a file.

        ``format`` is "markdown", "text" (read as a ``.txt`` file is),
        "html" or "rst" (reStructuredText); ``strategy`` overrides the parent strategy as for files.
        ``metadata`` (a JSON object) is stored on the document; ``filter``
        matches it.  Bad input raises :class:`IngestError` before anything
        is written, so what is stored stays as it was.
        """
        options = _with_strategy(options, strategy)
        tree = load_text(text, source=source, format=format, strategy=options.strategy,
                         window_tokens=options.window_tokens)
        embedder = self.ingest_embedder(collection, lambda: [text])
        return self._write_tree(tree, collection, embedder, options, None, None, force,
                                check_metadata(metadata, source))

    def ingest_texts(
        self,
        items: Iterable[TextItem | tuple[str, str] | tuple[str, str, dict[str, Any] | None]],
        *,
        collection: str = "default",
        strategy: Strategy | None = None,
        format: TextFormat = "markdown",
        options: IngestOptions | None = None,
        force: bool = False,
        progress: Progress | None = None,
    ) -> IngestReport:
        """Ingest many ``(text, source[, metadata])`` items, one transaction each.

        Every item is parsed and checked first: one bad item (empty text, a
        NUL, metadata that is not a JSON object, a source named twice) raises
        :class:`IngestError` naming it before anything is written.
        """
        started = time.perf_counter()
        options = _with_strategy(options, strategy)
        parsed: list[tuple[DocumentTree, dict[str, Any]]] = []
        seen: dict[str, int] = {}
        for index, item in enumerate(items):
            text, source, metadata = _text_item(item, index)
            if source in seen:
                raise IngestError(f"items {seen[source]} and {index} both have source {source!r}; "
                                  "each document needs its own source")
            seen[source] = index
            tree = load_text(text, source=source, format=format, strategy=options.strategy,
                             window_tokens=options.window_tokens)
            parsed.append((tree, check_metadata(metadata, source)))
        report = IngestReport()
        embedder = self.ingest_embedder(collection, lambda: [tree.root.full_text() for tree, _ in parsed[:16]])
        for index, (tree, metadata) in enumerate(parsed, start=1):
            report.results.append(self._write_tree(tree, collection, embedder, options, None, None, force,
                                                   metadata))
            if progress:
                progress("files", index, len(parsed))
        report.seconds = time.perf_counter() - started
        return report

    def ingest_tree(
        self,
        tree: DocumentTree,
        *,
        collection: str = "default",
        options: IngestOptions | None = None,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Ingest a tree built by your own parser (or one of ours)."""
        embedder = self.ingest_embedder(collection, lambda: [tree.root.full_text()])
        doc = prepare_tree(tree, options or IngestOptions(), collection=collection,
                           model_name=model_key(embedder), counter=embedder.token_counter)
        return self.repository.write_document(doc, embedder, progress=progress)

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

    def rename_from_paths(
        self,
        paths: Iterable[str | Path],
        *,
        collection: str = "default",
        dry_run: bool = False,
        options: IngestOptions | None = None,
    ) -> list[Rename]:
        """Move documents ingested under the old naming (the path as typed) to today's names.

        For each file under ``paths``, named by today's rule, a stored
        document whose source is that file's old-style name is rewritten
        under the new name — in one transaction that reuses its embeddings
        and deletes the old row, so nothing is re-embedded and nothing is
        lost.  Ambiguous matches are reported and left alone; ``dry_run``
        only reports.
        """
        options = options or IngestOptions()
        files, _ = name_files(list(paths))
        stored = [s.source for s in self.sources(collection)]
        plans: list[Rename] = []
        claimed: dict[str, int] = {}
        for file, new_name in files:
            found = old_names(file, new_name, stored)
            if len(found) == 1:
                claimed[found[0]] = claimed.get(found[0], 0) + 1
            plans.append(Rename(path=str(file), new=new_name, old=found[0] if len(found) == 1 else None,
                                status="planned" if len(found) == 1 else
                                ("ambiguous: " + ", ".join(found) if found else "no old-named document")))
        for plan in plans:
            if plan.old is not None and claimed[plan.old] > 1:
                plan.status, plan.old = f"ambiguous: {plan.old} matches several files", None
            elif plan.old is not None and plan.new in stored:
                plan.status = f"both {plan.old!r} and {plan.new!r} are stored; delete one first"
                plan.old = None
        if dry_run:
            return plans
        embedder = self.ingest_embedder(collection)
        for plan in plans:
            if plan.old is None:
                continue
            old_metadata = next(s.metadata for s in self.sources(collection) if s.source == plan.old)
            tree = _load_file(Path(plan.path), plan.new, options)
            tree.metadata = {**old_metadata, **tree.metadata}  # the user's keys travel; hrag's are fresh
            doc = prepare_tree(tree, options, collection=collection, model_name=model_key(embedder),
                               counter=embedder.token_counter)
            result = self.repository.write_document(doc, embedder, replaces=plan.old)
            plan.status, plan.embedded = "renamed", result.embedded
        return plans

    def reembed(self, collection: str, model: str | Embedder, *, progress: Progress | None = None) -> ReembedReport:
        """Switch ``collection`` to another embedding model in place (see :mod:`hrag_pg.reembed`).

        The new vectors and token counts are prepared one document per
        transaction and swapped in for the whole collection at once, so
        readers see one model or the other, never both; an interrupted run
        resumes where it stopped when called again with the same model.
        """
        target = self._checked(embedder_for(canonical_name(model)) if isinstance(model, str) else model)
        if collection not in self.repository.collections():
            raise NotFound(f"no collection {collection!r} in this database")
        identity = identity_of(target)
        with self.repository.engine.begin() as conn:
            # (a collection ingested before models were recorded adopts the model this installation uses)
            current = (collection_model.recorded(conn, [collection]).get(collection)
                       or collection_model.claim(conn, collection, identity_of(self.embedder)))
            pending = collection_model.pending(conn, collection)
        if pending is not None and not pending.matches(identity):
            raise HragError(
                f"an unfinished reembed of collection {collection!r} to {pending.name} is under way; finish it "
                f"(`hrag reembed -c {collection} --model {pending.name}`) or cancel it "
                f"(`hrag reembed -c {collection} --cancel`)")
        if pending is None and current.matches(identity):
            return ReembedReport(collection, identity.name, current.name, status="unchanged")
        report = Reembedder(self.repository.engine, collection, target, model_key(target), progress).run(current)
        self._model_records.clear()
        return report

    def cancel_reembed(self, collection: str) -> bool:
        """Forget an unfinished reembed of ``collection`` (its prepared vectors); False if none was under way."""
        with self.repository.engine.begin() as conn:
            if collection_model.pending(conn, collection) is None:
                return False
            collection_model.cancel_switch(conn, collection)
        return True

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


@dataclass
class Rename:
    """One file of :meth:`HRAG.rename_from_paths`: its new name, the old one found, what happened."""

    path: str
    new: str
    old: str | None
    status: str
    embedded: int = 0


@dataclass(frozen=True)
class TextItem:
    """One document for :meth:`HRAG.ingest_texts`: its text, source name and metadata."""

    text: str
    source: str
    metadata: dict[str, Any] | None = None


def _text_item(item: Any, index: int) -> tuple[str, str, dict[str, Any] | None]:
    if isinstance(item, TextItem):
        return item.text, item.source, item.metadata
    if isinstance(item, tuple) and len(item) in (2, 3):
        text, source = item[0], item[1]
        return text, check_source(source), item[2] if len(item) == 3 else None
    raise IngestError(f"item {index} must be a TextItem or a (text, source[, metadata]) tuple, "
                      f"got {type(item).__name__}")


def _with_strategy(options: IngestOptions | None, strategy: Strategy | None) -> IngestOptions:
    options = options or IngestOptions()
    return dataclasses.replace(options, strategy=strategy) if strategy is not None else options


def _load_file(path: Path, name: str, options: IngestOptions) -> DocumentTree:
    """The file's tree, recording the file it was read from (``file_path``, see :meth:`HRAG.ingest`)."""
    tree = load_document(path, strategy=options.strategy, source=name, errors=options.errors,
                         window_tokens=options.window_tokens)
    tree.metadata[FILE_PATH_KEY] = str(path.resolve())
    return tree


def _refuse_replacing_another_file(path: Path, file_path: str, name: str, collection: str,
                                   stored_from: str | None) -> None:
    """IngestError if ``name`` is stored from another file that still exists (see :meth:`HRAG.ingest`)."""
    if stored_from is None or stored_from == file_path or not Path(stored_from).exists():
        return
    if Path(stored_from).resolve() == Path(file_path):
        return
    raise IngestError(
        f"{path}: collection {collection!r} already holds {name!r}, ingested from another file that still "
        f"exists ({stored_from}); this would replace it. To keep both, give this one its own name (--source) "
        "or another collection; to replace it, pass --replace (replace=True)"
    )


def _stamp(embedder: Embedder) -> tuple[str, str]:
    """What hrag._checked_collection compares with a collection's record: the model's name and fingerprint."""
    identity = identity_of(embedder)
    return identity.name, identity.fingerprint


def model_key(embedder: Embedder) -> str:
    """What the content hashes say of the model: its weights' fingerprint, or its name without one.

    A leaf whose text and model are unchanged keeps its embedding on re-ingest.
    """
    identity = identity_of(embedder)
    return identity.fingerprint or identity.name


#: Files and characters per file read to choose a new collection's model.
_SAMPLE_FILES, _SAMPLE_CHARS = 16, 20_000


def _sample_files(files: list[tuple[Path, str]]) -> list[str]:
    """The start of the first files' text, for :func:`hrag_pg.embedding.model_for_texts`."""
    import gzip

    texts = []
    for path, _ in files[:_SAMPLE_FILES]:
        if path.suffix.lower() == ".pdf":
            continue  # (compressed streams: their bytes say nothing of the script)
        try:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rb") as handle:
                texts.append(handle.read(_SAMPLE_CHARS * 3).decode("utf-8", errors="ignore")[:_SAMPLE_CHARS])
        except OSError:
            continue  # the file's own error comes when it is read for real
    return texts


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
    "TextItem",
    "check_question",
]
