"""The retrieval flow, written once for sync and async callers.

search → filter → rerank → expand/merge → budget is a *generator* of requests
(:class:`Fetch` a statement, :class:`Rerank` some hits) that never does I/O
itself.  :func:`run` drives it on the sync repository, :func:`arun` on the
async one (the reranker, CPU-bound, runs in a thread there).  So the sync
``retrieve`` and the async ``aretrieve`` cannot diverge: they are the same
steps with a different driver.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from . import context as context_module
from . import defaults, queries
from .errors import HragError
from .models import Context, RetrievalResult, SearchHit
from .repository import hits_arrays, to_hit, to_result
from .rerank import Reranker

if TYPE_CHECKING:  # pragma: no cover
    from .api import HRAG

T = TypeVar("T")


@dataclass(frozen=True)
class Fetch:
    """Run one statement; the flow receives its rows (dicts)."""

    sql: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Rerank:
    """Rescore hits with the reranker; the flow receives the best ``keep``, best first."""

    question: str
    hits: list[SearchHit]
    reranker: Reranker
    keep: int


Request = Fetch | Rerank
Flow = Generator[Request, Any, T]
Fetcher = Callable[[str, dict[str, Any]], list[dict[str, Any]]]
AsyncFetcher = Callable[[str, dict[str, Any]], Awaitable[list[dict[str, Any]]]]


def reranked(question: str, hits: list[SearchHit], reranker: Reranker, keep: int) -> list[SearchHit]:
    """Rescore candidate children with the reranker; best ``keep`` first."""
    scores = reranker.score(question, [h.rerank_text for h in hits])
    if len(scores) != len(hits):
        raise HragError(f"the reranker returned {len(scores)} scores for {len(hits)} texts")
    rescored = [h.model_copy(update={"score": float(s)}) for h, s in zip(hits, scores, strict=True)]
    rescored.sort(key=lambda h: -h.score)
    return rescored[:keep]


def run(flow: Flow[T], fetch: Fetcher) -> T:
    """Drive a flow synchronously."""
    try:
        request = next(flow)
        while True:
            if isinstance(request, Fetch):
                request = flow.send(fetch(request.sql, request.params))
            else:
                request = flow.send(reranked(request.question, request.hits, request.reranker, request.keep))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun(flow: Flow[T], fetch: AsyncFetcher) -> T:
    """Drive a flow on an event loop (the reranker runs in a worker thread)."""
    try:
        request = next(flow)
        while True:
            if isinstance(request, Fetch):
                rows = await fetch(request.sql, request.params)
                request = flow.send(rows)
            else:
                best = await asyncio.to_thread(reranked, request.question, request.hits, request.reranker,
                                               request.keep)
                request = flow.send(best)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# ------------------------------------------------------------------ retrievers


@dataclass
class BaseRetriever:
    """Settings shared by every mode.

    ``lexical_weight`` blends lexical term overlap into the vector score
    (``hrag.search_hybrid``; 0 uses the plain functions), ``min_relative_score``
    drops hits scoring below that share of the best hit, and a ``reranker``
    rescores the ``rerank_candidates`` best children before expansion or
    merging.  ``max_context_tokens`` bounds :meth:`context`.
    """

    hrag: HRAG
    collection: str | None = None
    filter: dict[str, Any] | None = None
    lexical_weight: float = defaults.LEXICAL_WEIGHT
    candidates: int | None = None
    min_relative_score: float | None = None
    reranker: Reranker | None = None
    rerank_candidates: int = defaults.RERANK_CANDIDATES
    max_context_tokens: int | None = None

    mode = "parent-child"

    def _search(self, question: str, query: np.ndarray) -> queries.Search:
        return queries.Search(query=query, text=question, collection=self.collection, filter=self.filter,
                              lexical_weight=self.lexical_weight, candidates=self.candidates,
                              min_relative_score=self.min_relative_score)

    # The steps: subclasses say which statements a mode sends.
    def results_flow(self, question: str, query: np.ndarray) -> Flow[list[RetrievalResult]]:
        raise NotImplementedError

    def _hits_k(self) -> int:
        """How many candidates the mode's results were built from."""
        raise NotImplementedError

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        """The mode's statement for its context within ``budget``, results and fitting in one."""
        raise NotImplementedError

    def context_flow(self, question: str, query: np.ndarray) -> Flow[Context]:
        """The results, then the budget: greedy by score within ``max_context_tokens``.

        A passage that does not fit is not simply dropped while smaller,
        worse ones are kept: it is replaced by the best part of it that fits
        the budget left at its turn (the budget mode over the hits it was
        chosen for: its matched children, or the hits it absorbed).  The
        database does both in the statement that finds the results
        (``hrag._fit_budget``), in the stored token counts the budget mode
        uses; the replaced passage is reported in ``dropped``.
        """
        budget = self.max_context_tokens
        if budget is None:
            results = yield from self.results_flow(question, query)
            counter = self.hrag.query_embedder(self.collection).token_counter
            return context_module.assemble(results, None, counter)
        if budget <= 0:
            raise ValueError(f"max_tokens must be positive, got {budget}")
        if self.reranker is None:
            rows = yield Fetch(*self._context_plan(self._search(question, query), budget))
        else:
            given = yield from self._reranked(question, query)
            rows = yield Fetch(*self._given_hits_plan(given, budget))
        return _fitted_context(self.mode, rows, budget)

    def _reranked(self, question: str, query: np.ndarray) -> Flow[queries.GivenHits]:
        """The best candidates as the reranker rescored them, as arrays for the mode's statement.

        The arrays keep each hit's candidate-stage score beside the
        reranker's: a budget fitted in SQL weighs hits on the candidate
        stage's scale, whatever scale the reranker scores on.
        """
        assert self.reranker is not None
        rows = yield Fetch(*queries.plan_search(self._search(question, query), self._hits_k()))
        hits = self._eligible([to_hit(row) for row in rows])
        best = yield Rerank(question, hits, self.reranker, self._rerank_keep(hits))
        candidate_score = {h.node_id: h.score for h in hits}
        ids, scores = hits_arrays(best)
        return queries.GivenHits(ids, [h.document_id for h in best], scores,
                                       [candidate_score[h.node_id] for h in best])

    def _eligible(self, hits: list[SearchHit]) -> list[SearchHit]:
        """The candidates a reranker may choose from."""
        return hits

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        """How many of the reranked candidates the mode goes on with."""
        raise NotImplementedError

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        """The mode's statement for reranked hits: its results, or (``budget``) its context."""
        raise NotImplementedError

    # The drivers.
    def retrieve(self, question: str) -> list[RetrievalResult]:
        query = self.hrag.embed_query(question, self.collection)
        return run(self.results_flow(question, query), self.hrag.repository._fetch)

    def context(self, question: str) -> Context:
        """The results assembled greedily by score within ``max_context_tokens``."""
        query = self.hrag.embed_query(question, self.collection)
        return run(self.context_flow(question, query), self.hrag.repository._fetch)

    async def aretrieve(self, question: str) -> list[RetrievalResult]:
        query = await asyncio.to_thread(self.hrag.embed_query, question, self.collection)
        return await arun(self.results_flow(question, query), self.hrag.async_repository._fetch)

    async def acontext(self, question: str) -> Context:
        query = await asyncio.to_thread(self.hrag.embed_query, question, self.collection)
        return await arun(self.context_flow(question, query), self.hrag.async_repository._fetch)


def _results(mode: str, rows: list[dict[str, Any]]) -> list[RetrievalResult]:
    return [to_result(mode, row) for row in rows]


def _label(result: RetrievalResult) -> str:
    return " › ".join(p for p in result.heading_path if p) or result.title or str(result.node_id)


def _as_part_of(result: RetrievalResult, part: RetrievalResult) -> RetrievalResult:
    """A budget-mode part standing in for ``result``, which did not fit: its place, and why."""
    return part.model_copy(update={
        "mode": result.mode, "score": result.score, "rank": result.rank,
        "reason": f"the part of {_label(result)} that fits the budget ({part.explanation()})",
    })


def _fitted_context(mode: str, rows: list[dict[str, Any]], budget: int) -> Context:
    """The Context of a ``queries.plan_*_context`` statement's steps (see ``hrag._fit_budget``)."""
    kept: list[RetrievalResult] = []
    dropped: list[RetrievalResult] = []
    owners: dict[int, RetrievalResult] = {}
    for row in rows:
        owner, step = row.pop("owner"), row.pop("kept")
        if step == "part":
            kept.append(_as_part_of(owners[owner], to_result("auto", row)))
            continue
        row.pop("reason")
        result = to_result(mode, row)
        owners[owner] = result
        (kept if step == "whole" else dropped).append(result)
    return Context(results=kept, dropped=dropped, total_tokens=sum(r.token_count for r in kept), max_tokens=budget)


@dataclass
class ParentChildRetriever(BaseRetriever):
    """Small-to-big: match children, return their whole parents (``hrag.parent_child``)."""

    top_k_children: int = defaults.TOP_K_CHILDREN
    max_parents: int = defaults.MAX_PARENTS
    min_score: float | None = None

    mode = "parent-child"

    def _hits_k(self) -> int:
        return max(self.rerank_candidates, self.top_k_children) if self.reranker else self.top_k_children

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        return queries.plan_parent_child_context(search, self.top_k_children, self.max_parents, self.min_score,
                                                 budget)

    def _eligible(self, hits: list[SearchHit]) -> list[SearchHit]:
        return hits if self.min_score is None else [h for h in hits if h.score >= self.min_score]

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        return len(hits)

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        if budget is None:
            return queries.plan_parent_child_hits(hits.ids, hits.scores, self.max_parents, self.top_k_children)
        return queries.plan_parent_child_hits_context(hits, self.max_parents, self.top_k_children, budget)

    def results_flow(self, question: str, query: np.ndarray) -> Flow[list[RetrievalResult]]:
        if self.reranker is None:
            rows = yield Fetch(*queries.plan_parent_child(self._search(question, query), self.top_k_children,
                                                          self.max_parents, self.min_score))
        else:
            given = yield from self._reranked(question, query)
            rows = yield Fetch(*self._given_hits_plan(given, None))
        return _results(self.mode, rows)


@dataclass
class AutoMergingRetriever(BaseRetriever):
    """Auto-merging: hit leaves, merge siblings into parents upward (``hrag.auto_merge``)."""

    top_k: int = defaults.TOP_K
    merge_threshold: float = defaults.MERGE_THRESHOLD
    #: Hits are at most this share of the collection's search targets (``hrag.sample_hits``): twelve hits
    #: in a 35-item policy would merge into the whole document whatever the question.  None: plain top_k.
    max_hit_share: float | None = defaults.MAX_HIT_SHARE

    mode = "auto-merge"

    def _hits_k(self) -> int:
        return max(self.rerank_candidates, self.top_k) if self.reranker else self.top_k

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        return queries.plan_auto_merge_context(search, self.top_k, self.merge_threshold, self.max_hit_share, budget)

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        return self.top_k

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        if budget is None:
            return queries.plan_auto_merge_hits(hits.ids, hits.scores, self.merge_threshold)
        return queries.plan_auto_merge_hits_context(hits, self.merge_threshold, budget)

    def results_flow(self, question: str, query: np.ndarray) -> Flow[list[RetrievalResult]]:
        if self.reranker is None:
            rows = yield Fetch(*queries.plan_auto_merge(self._search(question, query), self.top_k,
                                                        self.merge_threshold, self.max_hit_share))
        else:
            given = yield from self._reranked(question, query)
            rows = yield Fetch(*self._given_hits_plan(given, None))
        return _results(self.mode, rows)


@dataclass
class AutoRetriever(BaseRetriever):
    """Budget-aware: the best non-overlapping context within ``max_tokens`` (``hrag.retrieve``).

    From the hits' ancestor paths the SQL chooses leaves, sections or whole
    chapters by the evidence each covers per token, never a node with its
    ancestor, while what a node adds is worth its tokens: a narrow question
    gets a few small nodes, a broad one merged sections, up to the budget.  ``max_tokens`` is measured in the stored
    token counts of the nodes' subtrees.  With a ``reranker``, the
    candidates are rescored first and the selection runs on them
    (``hrag.retrieve_hits``).
    """

    max_tokens: int = defaults.MAX_TOKENS
    top_k: int = defaults.AUTO_TOP_K
    mode = "auto"

    def _budget(self) -> int:
        return self.max_context_tokens if self.max_context_tokens is not None else self.max_tokens

    def _hits_k(self) -> int:
        return max(self.rerank_candidates, self.top_k) if self.reranker else self.top_k

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        return self.top_k

    def results_flow(self, question: str, query: np.ndarray) -> Flow[list[RetrievalResult]]:
        if self.reranker is None:
            rows = yield Fetch(*queries.plan_retrieve(self._search(question, query), self.top_k, self._budget()))
        else:
            given = yield from self._reranked(question, query)
            rows = yield Fetch(*queries.plan_retrieve_hits(given.ids, given.scores, self._budget()))
        return _results(self.mode, rows)

    def context_flow(self, question: str, query: np.ndarray) -> Flow[Context]:
        """The selection already fits the budget (in stored token counts): nothing is dropped."""
        results = yield from self.results_flow(question, query)
        return Context(results=results, total_tokens=sum(r.token_count for r in results), max_tokens=self._budget())


Mode = str  # one of defaults.MODES


def retriever_for(
    hrag: HRAG,
    mode: Mode = "parent-child",
    *,
    collection: str | None = None,
    filter: dict[str, Any] | None = None,
    top_k: int | None = None,
    max_parents: int = defaults.MAX_PARENTS,
    min_score: float | None = None,
    merge_threshold: float = defaults.MERGE_THRESHOLD,
    max_tokens: int | None = None,
    lexical_weight: float = defaults.LEXICAL_WEIGHT,
    candidates: int | None = None,
    min_relative_score: float | None = None,
    reranker: Reranker | None = None,
    rerank_candidates: int = defaults.RERANK_CANDIDATES,
) -> BaseRetriever:
    """The retriever of one mode, named the way the CLI and the adapters name the settings.

    ``top_k`` is the children matched (parent-child, default
    ``defaults.TOP_K_CHILDREN``) or the leaves hit (auto-merge, default
    ``defaults.TOP_K``) or the hits feeding the selection (auto, ``defaults.AUTO_TOP_K``);
    ``max_tokens`` is the context budget (auto: ``defaults.MAX_TOKENS`` when None).
    """
    common: dict[str, Any] = {
        "collection": collection, "filter": filter, "lexical_weight": lexical_weight, "candidates": candidates,
        "min_relative_score": min_relative_score, "reranker": reranker, "rerank_candidates": rerank_candidates,
        "max_context_tokens": max_tokens,
    }
    if mode == "parent-child":
        return ParentChildRetriever(hrag, top_k_children=defaults.TOP_K_CHILDREN if top_k is None else top_k,
                                    max_parents=max_parents, min_score=min_score, **common)
    if mode == "auto-merge":
        return AutoMergingRetriever(hrag, top_k=defaults.TOP_K if top_k is None else top_k,
                                    merge_threshold=merge_threshold, **common)
    if mode == "auto":
        common["max_context_tokens"] = None
        return AutoRetriever(hrag, top_k=defaults.AUTO_TOP_K if top_k is None else top_k,
                             max_tokens=defaults.MAX_TOKENS if max_tokens is None else max_tokens, **common)
    raise ValueError(f"mode must be one of {', '.join(available_modes())}, got {mode!r}")


def available_modes() -> tuple[str, ...]:
    return defaults.MODES
