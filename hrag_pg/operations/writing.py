"""The writing operations: ingest files, texts or a tree; rename documents to today's names; switch a
collection's embedding model (reembed).

Each document is its own transaction (:meth:`~hrag_pg.repository.Repository.write_document`), and
bad input is refused, naming the file or item, before anything of it is written.  What a write needs
of the model choice (which model writes a collection, and why) is the facade's, handed in as
:class:`IngestModels`, so the operations stay on a repository as the reading ones do
(:attr:`hrag_pg.api.HRAG.writer` makes one).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import collection_model
from ..embedding import Embedder, identity_of
from ..errors import HragError, IngestError, unknown_collection
from ..ingest.children import QuestionGenerator
from ..ingest.flatten import FILE_PATH_KEY
from ..ingest.loaders import load_document
from ..ingest.pipeline import IngestOptions, Strategy, prepare_tree
from ..ingest.sources import keep_stored_names, name_files, old_names
from ..ingest.text import TextFormat, check_metadata, check_source, load_text
from ..ingest.tree import DocumentTree
from ..models import IngestResult
from ..reembed import Reembedder, ReembedReport
from .reading import stored_sources

if TYPE_CHECKING:  # pragma: no cover
    from ..repository import Progress, Repository


@dataclass(frozen=True)
class IngestModels:
    """What writing needs of the facade's model choice (:class:`hrag_pg.api.HRAG` provides one)."""

    #: The embedder that writes a collection: ``choose(collection, sample, on_model)`` (the one asked
    #: for, the one it recorded, or for a new collection the default for ``sample()``'s script).
    choose: Callable[..., Embedder]
    #: The embedder of a model named by the user (``reembed --model e5``).
    named: Callable[[str], Embedder]
    #: The installation's default embedder (a collection ingested before models were recorded adopts it).
    default: Callable[[], Embedder]
    #: The embedder, once its dimension is found to be the installation's.
    checked: Callable[[Embedder], Embedder]
    #: Forget what is remembered of the collections' models (a write may record or switch one).
    changed: Callable[[], None]


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


class Writer:
    """The writing operations on a repository, with the facade's model choice."""

    def __init__(self, repository: Repository, models: IngestModels) -> None:
        self.repository = repository
        self.models = models

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
        embedder = self.models.choose(collection, lambda: _sample_files(files), on_model)
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
        self.models.changed()  # (a first write records a model)
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
        embedder = self.models.choose(collection, lambda: [text])
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
        embedder = self.models.choose(collection, lambda: [tree.root.full_text() for tree, _ in parsed[:16]])
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
        embedder = self.models.choose(collection, lambda: [tree.root.full_text()])
        doc = prepare_tree(tree, options or IngestOptions(), collection=collection,
                           model_name=model_key(embedder), counter=embedder.token_counter)
        return self.repository.write_document(doc, embedder, progress=progress)

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
        documents = stored_sources(self.repository, collection)
        stored = [d["source"] for d in documents]
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
        embedder = self.models.choose(collection)
        for plan in plans:
            if plan.old is None:
                continue
            old_metadata = next(d["metadata"] for d in documents if d["source"] == plan.old)
            tree = _load_file(Path(plan.path), plan.new, options)
            tree.metadata = {**old_metadata, **tree.metadata}  # the user's keys travel; hrag's are fresh
            doc = prepare_tree(tree, options, collection=collection, model_name=model_key(embedder),
                               counter=embedder.token_counter)
            result = self.repository.write_document(doc, embedder, replaces=plan.old)
            plan.status, plan.embedded = "renamed", result.embedded
        return plans

    def reembed(self, collection: str, model: str | Embedder, *,
                progress: Progress | None = None) -> ReembedReport:
        """Switch ``collection`` to another embedding model in place (see :mod:`hrag_pg.reembed`).

        The new vectors and token counts are prepared one document per
        transaction and swapped in for the whole collection at once, so
        readers see one model or the other, never both; an interrupted run
        resumes where it stopped when called again with the same model.
        """
        target = self.models.checked(self.models.named(model) if isinstance(model, str) else model)
        existing = self.repository.collections()
        if collection not in existing:
            raise unknown_collection(collection, existing)
        identity = identity_of(target)
        with self.repository.engine.begin() as conn:
            # (a collection ingested before models were recorded adopts the model this installation uses)
            current = (collection_model.recorded(conn, [collection]).get(collection)
                       or collection_model.claim(conn, collection, identity_of(self.models.default())))
            pending = collection_model.pending(conn, collection)
        if pending is not None and not pending.matches(identity):
            raise HragError(
                f"an unfinished reembed of collection {collection!r} to {pending.name} is under way; finish it "
                f"(`hrag reembed -c {collection} --model {pending.name}`) or cancel it "
                f"(`hrag reembed -c {collection} --cancel`)")
        if pending is None and current.matches(identity):
            return ReembedReport(collection, identity.name, current.name, status="unchanged")
        report = Reembedder(self.repository.engine, collection, target, model_key(target), progress).run(current)
        self.models.changed()
        return report

    def cancel_reembed(self, collection: str) -> bool:
        """Forget an unfinished reembed of ``collection`` (its prepared vectors); False if none was under way."""
        with self.repository.engine.begin() as conn:
            if collection_model.pending(conn, collection) is None:
                return False
            collection_model.cancel_switch(conn, collection)
        return True


@dataclass
class Rename:
    """One file of :meth:`Writer.rename_from_paths`: its new name, the old one found, what happened."""

    path: str
    new: str
    old: str | None
    status: str
    embedded: int = 0


@dataclass(frozen=True)
class TextItem:
    """One document for :meth:`Writer.ingest_texts`: its text, source name and metadata."""

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
    """The file's tree, recording the file it was read from (``file_path``, see :meth:`Writer.ingest`)."""
    tree = load_document(path, strategy=options.strategy, source=name, errors=options.errors,
                         window_tokens=options.window_tokens)
    tree.metadata[FILE_PATH_KEY] = str(path.resolve())
    return tree


def _refuse_replacing_another_file(path: Path, file_path: str, name: str, collection: str,
                                   stored_from: str | None) -> None:
    """IngestError if ``name`` is stored from another file that still exists (see :meth:`Writer.ingest`)."""
    if stored_from is None or stored_from == file_path or not Path(stored_from).exists():
        return
    if Path(stored_from).resolve() == Path(file_path):
        return
    raise IngestError(
        f"{path}: collection {collection!r} already holds {name!r}, ingested from another file that still "
        f"exists ({stored_from}); this would replace it. To keep both, give this one its own name (--source) "
        "or another collection; to replace it, pass --replace (replace=True)"
    )


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
