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
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import context as context_module
from . import db, migrate
from .async_repository import AsyncRepository
from .embedding import Embedder, default_embedder
from .errors import HragError, IngestError
from .ingest.children import QuestionGenerator
from .ingest.loaders import iter_supported_files
from .ingest.pipeline import IngestOptions, prepare_file, prepare_tree
from .ingest.tokens import TokenCounter
from .ingest.tree import DocumentTree
from .models import ChildChunk, Context, IngestResult, ParentChunk, RetrievalResult, SearchHit
from .queries import Search
from .repository import Progress, Repository
from .rerank import Reranker

#: Longest question accepted; the model reads 256 tokens anyway.
MAX_QUESTION_CHARS = 10_000
#: Default weight of lexical term overlap in the hybrid score (see sql/0003_hybrid.sql).
DEFAULT_LEXICAL_WEIGHT = 0.3


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


def check_question(question: str) -> str:
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty; ask something")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(
            f"the question is {len(question):,} characters long; the limit is {MAX_QUESTION_CHARS:,} "
            "(the embedding model reads only its first 256 tokens)"
        )
    return question


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
        self._model = model
        self._embedder_checked = False
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
        if migrate_schema and migrate.needs_upgrade(resolved):
            migrate.upgrade(resolved)
        return cls(resolved, **kwargs)

    # ------------------------------------------------------------- embedding

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = default_embedder(self._model)
        if not self._embedder_checked:
            self.repository.check_ready(self._embedder.dim)
            self._embedder_checked = True
        return self._embedder

    def _ingest_embedder(self) -> Embedder:
        """The embedder for ingestion: the model is loaded only once a text must be embedded.

        Parsing and hashing need only the tokenizer, so an unchanged re-ingest
        never loads the model weights.
        """
        if self._embedder is not None:
            return self.embedder
        return _DeferredEmbedder(self, default_embedder(self._model))

    def embed_query(self, question: str) -> np.ndarray:
        return np.asarray(self.embedder.embed([check_question(question)])[0], dtype=np.float32)

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
        on_file: Callable[[Path, int, int], None] | None = None,
    ) -> IngestReport:
        """Ingest files and directories; unsupported files are skipped and reported.

        Each document is its own transaction: a bad file is reported in
        ``failed`` (or raised with ``stop_on_error``) and never touches what
        is stored for the others.  ``bulk`` drops the vector index for the
        duration and rebuilds it once at the end (much faster for big
        initial loads; searches meanwhile fall back to sequential scans);
        bulk loads take a lock so two never run at once, and end with ANALYZE.
        ``on_file(path, index, total)`` is called before each file is parsed
        (the CLI's status line).
        """
        started = time.perf_counter()
        options = options or IngestOptions()
        report = IngestReport()
        paths = list(paths)
        for p in paths:
            if not Path(p).exists():
                raise IngestError(f"{p}: no such file or directory")
        files, skipped = iter_supported_files(paths)
        report.skipped = [(str(p), reason) for p, reason in skipped]
        if bulk:
            _ = self.embedder  # load the model and check its dimension before touching the index
        with self.repository.vector_index_suspended() if bulk else contextlib.nullcontext():
            self._ingest_files(files, report, collection, options, progress, question_generator,
                               stop_on_error, force, on_file)
        report.seconds = time.perf_counter() - started
        return report

    def _ingest_files(self, files: list[Path], report: IngestReport, collection: str, options: IngestOptions,
                      progress: Progress | None, question_generator: QuestionGenerator | None,
                      stop_on_error: bool, force: bool,
                      on_file: Callable[[Path, int, int], None] | None = None) -> None:
        embedder = self._ingest_embedder()
        counter = embedder.token_counter
        for index, path in enumerate(files, start=1):
            if on_file:
                on_file(path, index, len(files))
            try:
                doc = prepare_file(path, options, collection=collection, model_name=_model_name(embedder),
                                   counter=counter, question_generator=question_generator)
                report.results.append(self.repository.write_document(doc, embedder, progress=progress,
                                                                     force=force))
            except HragError as exc:
                if stop_on_error:
                    raise
                report.failed.append((str(path), str(exc)))
            if progress:
                progress("files", index, len(files))

    def ingest_tree(
        self,
        tree: DocumentTree,
        *,
        collection: str = "default",
        options: IngestOptions | None = None,
        progress: Progress | None = None,
    ) -> IngestResult:
        """Ingest a tree built by your own parser (or one of ours)."""
        embedder = self.embedder
        doc = prepare_tree(tree, options or IngestOptions(), collection=collection,
                           model_name=_model_name(embedder), counter=embedder.token_counter)
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

    # ------------------------------------------------------------- retrieval

    def parent_child(self, question: str, **settings: Any) -> list[RetrievalResult]:
        return ParentChildRetriever(self, **settings).retrieve(question)

    def auto_merge(self, question: str, **settings: Any) -> list[RetrievalResult]:
        return AutoMergingRetriever(self, **settings).retrieve(question)


class _DeferredEmbedder:
    """An :class:`Embedder` that loads its model on the first text to embed.

    The model name and the token counter (the tokenizer alone) are available
    before that, which is all parsing and content hashing need.
    """

    def __init__(self, hrag: HRAG, unloaded: Embedder) -> None:
        self._hrag = hrag
        self._unloaded = unloaded
        self.model_name = _model_name(unloaded)

    @property
    def dim(self) -> int:
        return self._hrag.embedder.dim

    @property
    def token_counter(self) -> TokenCounter:
        return self._unloaded.token_counter

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._hrag.embedder.embed(texts)


def _model_name(embedder: Embedder) -> str:
    return str(getattr(embedder, "model_name", type(embedder).__name__))


def _reranked(question: str, hits: list[SearchHit], reranker: Reranker, keep: int) -> list[SearchHit]:
    """Rescore candidate children with the reranker; best ``keep`` first."""
    scores = reranker.score(question, [h.rerank_text for h in hits])
    if len(scores) != len(hits):
        raise HragError(f"the reranker returned {len(scores)} scores for {len(hits)} texts")
    rescored = [h.model_copy(update={"score": float(s)}) for h, s in zip(hits, scores, strict=True)]
    rescored.sort(key=lambda h: -h.score)
    return rescored[:keep]


@dataclass
class _Retriever:
    """Settings shared by both modes.

    ``lexical_weight`` blends lexical term overlap into the vector score
    (``hrag.search_hybrid``; 0 uses the plain functions), ``min_relative_score``
    drops hits scoring below that share of the best hit, and a ``reranker``
    rescores the ``rerank_candidates`` best children before expansion or
    merging.  ``max_context_tokens`` bounds :meth:`context`.
    """

    hrag: HRAG
    collection: str | None = None
    filter: dict[str, Any] | None = None
    lexical_weight: float = DEFAULT_LEXICAL_WEIGHT
    candidates: int | None = None
    min_relative_score: float | None = None
    reranker: Reranker | None = None
    rerank_candidates: int = 50
    max_context_tokens: int | None = None

    def _search(self, question: str, query: np.ndarray) -> Search:
        return Search(query=query, text=question, collection=self.collection, filter=self.filter,
                      lexical_weight=self.lexical_weight, candidates=self.candidates,
                      min_relative_score=self.min_relative_score)

    def retrieve(self, question: str) -> list[RetrievalResult]:
        raise NotImplementedError

    def context(self, question: str) -> Context:
        """The results assembled greedily by score within ``max_context_tokens``."""
        return context_module.assemble(self.retrieve(question), self.max_context_tokens,
                                       self.hrag.embedder.token_counter)


@dataclass
class ParentChildRetriever(_Retriever):
    """Small-to-big: match children, return their whole parents (``hrag.parent_child``)."""

    top_k_children: int = 20
    max_parents: int = 4
    min_score: float | None = None

    def retrieve(self, question: str) -> list[RetrievalResult]:
        search = self._search(question, self.hrag.embed_query(question))
        repo = self.hrag.repository
        if self.reranker is None:
            return repo.parent_child(search, top_k_children=self.top_k_children, max_parents=self.max_parents,
                                     min_score=self.min_score)
        hits = repo.search(search, max(self.rerank_candidates, self.top_k_children))
        if self.min_score is not None:
            hits = [h for h in hits if h.score >= self.min_score]
        best = _reranked(question, hits, self.reranker, len(hits))
        return repo.parent_child_hits(best, self.max_parents, self.top_k_children)


@dataclass
class AutoMergingRetriever(_Retriever):
    """Auto-merging: hit leaves, merge siblings into parents upward (``hrag.auto_merge``)."""

    top_k: int = 12
    merge_threshold: float = 0.5

    def retrieve(self, question: str) -> list[RetrievalResult]:
        search = self._search(question, self.hrag.embed_query(question))
        repo = self.hrag.repository
        if self.reranker is None:
            return repo.auto_merge(search, top_k=self.top_k, merge_threshold=self.merge_threshold)
        hits = repo.search(search, max(self.rerank_candidates, self.top_k))
        best = _reranked(question, hits, self.reranker, self.top_k)
        return repo.auto_merge_hits(best, self.merge_threshold)


class AsyncHRAG:
    """Async retrieval on psycopg's AsyncConnection, sharing the sync facade's model.

    The methods take the same settings as the retrievers' constructors.
    """

    def __init__(self, hrag: HRAG) -> None:
        self.hrag = hrag
        self.repository = AsyncRepository(hrag.url)

    @classmethod
    async def open(cls, url: str | None = None, **kwargs: Any) -> AsyncHRAG:
        return cls(await asyncio.to_thread(HRAG.open, url, **kwargs))

    async def embed_query(self, question: str) -> np.ndarray:
        return await asyncio.to_thread(self.hrag.embed_query, question)

    async def parent_child(self, question: str, **settings: Any) -> list[RetrievalResult]:
        retriever = ParentChildRetriever(self.hrag, **settings)
        search = retriever._search(question, await self.embed_query(question))
        if retriever.reranker is None:
            return await self.repository.parent_child(
                search, top_k_children=retriever.top_k_children, max_parents=retriever.max_parents,
                min_score=retriever.min_score)
        hits = await self.repository.search(search, max(retriever.rerank_candidates, retriever.top_k_children))
        if retriever.min_score is not None:
            hits = [h for h in hits if h.score >= retriever.min_score]
        best = await asyncio.to_thread(_reranked, question, hits, retriever.reranker, len(hits))
        return await self.repository.parent_child_hits(best, retriever.max_parents, retriever.top_k_children)

    async def auto_merge(self, question: str, **settings: Any) -> list[RetrievalResult]:
        retriever = AutoMergingRetriever(self.hrag, **settings)
        search = retriever._search(question, await self.embed_query(question))
        if retriever.reranker is None:
            return await self.repository.auto_merge(search, top_k=retriever.top_k,
                                                    merge_threshold=retriever.merge_threshold)
        hits = await self.repository.search(search, max(retriever.rerank_candidates, retriever.top_k))
        best = await asyncio.to_thread(_reranked, question, hits, retriever.reranker, retriever.top_k)
        return await self.repository.auto_merge_hits(best, retriever.merge_threshold)

    async def close(self) -> None:
        await self.repository.close()
