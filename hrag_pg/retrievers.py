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
import dataclasses
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from . import queries
from .errors import HragError, ModelChanged, unknown_collection
from .models import Context, RetrievalResult, SearchHit
from .rerank import Reranker
from .settings import AutoMergeSettings, BudgetSettings, ParentChildSettings, Settings

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
#: A question's vector, or one per collection (collections embedded with different models),
#: possibly stamped with the model that made it (``queries.Stamped``: then every statement checks it).
Query = np.ndarray | dict[str, np.ndarray] | queries.Stamped
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


def known_collection(collection: str | None) -> Flow[None]:
    """NotFound naming the collections that exist, if ``collection`` is not one of them (or this role sees
    none of its documents).  Flows ask it when they found nothing there: an answer costs no round trip."""
    if collection is None:
        return
    existing = [row["collection"] for row in (yield Fetch(queries.COLLECTIONS, {}))]
    if collection not in existing:
        raise unknown_collection(collection, existing)


# ------------------------------------------------------------------ retrievers


@dataclass(frozen=True)
class Reads:
    """What a retriever needs of an installation, and nothing more.

    The question's vector and a way to run one read statement (sync and
    async); token counts are the stored ones, as ``hrag outline`` shows them.  ``HRAG``
    provides one (:attr:`hrag_pg.HRAG.reads`); a test or another host can
    build its own.
    """

    #: The question's vector; for a question to every collection when they hold different models,
    #: one vector per collection (each its model's), which the modes search collection by collection.
    embed_query: Callable[[str, str | None], Query]
    fetch: Fetcher
    afetch: AsyncFetcher
    #: Forget what is remembered of the collections' models: a statement refused a stamped question
    #: (``ModelChanged``: a reembed switched a collection since), which is then embedded again once.
    models_changed: Callable[[], None] | None = None


S = TypeVar("S", ParentChildSettings, AutoMergeSettings, BudgetSettings)


@dataclass(frozen=True)
class BaseRetriever(Generic[S]):
    """One mode's retrieval: its settings (:mod:`hrag_pg.settings`) on an installation's reads.

    The subclasses say which statements a mode sends; the drivers at the
    bottom run them on the sync or the async connection.
    """

    reads: Reads
    settings: S

    @property
    def mode(self) -> str:
        return self.settings.mode

    def _search(self, question: str, query: Query) -> queries.Search:
        s = self.settings
        return queries.Search(query=queries.unstamped(query), text=question, collection=s.collection,
                              filter=s.filter, lexical_weight=s.lexical_weight, candidates=s.candidates,
                              min_relative_score=s.min_relative_score,
                              model=query.model if isinstance(query, queries.Stamped) else None)

    def results_flow(self, question: str, query: Query) -> Flow[list[RetrievalResult]]:
        """The mode's results for the question (the budget, if any, left to :meth:`context_flow`)."""
        if self._in_one_statement(query):
            rows = yield Fetch(*self._plan(self._search(question, query)))
        else:
            given = yield from self._given_hits(question, query)
            rows = yield Fetch(*self._given_hits_plan(given, None))
        return [queries.to_result(self.mode, row) for row in rows]

    def _in_one_statement(self, query: Query) -> bool:
        """Whether candidates and the mode go in one statement: not with a reranker between them, nor
        for a question to collections of different models (their candidates are merged first)."""
        return self.settings.reranker is None and not isinstance(queries.unstamped(query), dict)

    def _plan(self, search: queries.Search) -> tuple[str, dict[str, Any]]:
        """The mode's statement for its results."""
        raise NotImplementedError

    def _hits_k(self) -> int:
        """How many candidates the mode's results were built from (the reranker sees at least as many)."""
        raise NotImplementedError

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        """The mode's statement for its context within ``budget``, results and fitting in one."""
        raise NotImplementedError

    def context_flow(self, question: str, query: Query) -> Flow[Context]:
        """The results, then the budget: greedy by score within ``max_tokens``.

        A passage that does not fit is not simply dropped while smaller,
        worse ones are kept: it is replaced by the best part of it that fits
        the budget left at its turn (the budget mode over the hits it was
        chosen for: its matched children, or the hits it absorbed).  The
        database does both in the statement that finds the results
        (``hrag._fit_budget``), in the stored token counts the budget mode
        uses; the replaced passage is reported in ``dropped``.
        """
        budget = self.settings.max_tokens
        if budget is None:
            # (the stored counts, as with a budget: a node costs what the outline says it costs)
            results = yield from self.results_flow(question, query)
            return Context(results=results, total_tokens=sum(r.token_count for r in results))
        if budget <= 0:
            raise ValueError(f"max_tokens must be positive, got {budget}")
        if self._in_one_statement(query):
            rows = yield Fetch(*self._context_plan(self._search(question, query), budget))
            return _fitted_context(self.mode, rows, budget)
        given = yield from self._given_hits(question, query)
        rows = yield Fetch(*self._given_hits_plan(given, budget))
        return self._context_of(rows, budget)

    def traced_flow(self, question: str, query: Query) -> Flow[Traced]:
        """The context (:meth:`context_flow`'s) and the hits it was built from, for an inspector to mark.

        The mode runs on the hits it is given, as with a reranker, after the
        search its own statement makes (the same candidates, scores and
        count), so the answer is the one :meth:`context_flow` returns and
        every hit shown is one the mode read.
        """
        given = yield from self._given_hits(question, query, as_one_statement=self._in_one_statement(query))
        rows = yield Fetch(*self._given_hits_plan(given, self.settings.max_tokens))
        return Traced(given, self._context_of(rows, self.settings.max_tokens))

    def _context_of(self, rows: list[dict[str, Any]], budget: int | None) -> Context:
        """The Context of the mode's statement given its hits (``_given_hits_plan``)."""
        if budget is None:
            results = [queries.to_result(self.mode, row) for row in rows]
            return Context(results=results, total_tokens=sum(r.token_count for r in results))
        return _fitted_context(self.mode, rows, budget)

    def _given_hits(self, question: str, query: Query, *,
                    as_one_statement: bool = False) -> Flow[queries.GivenHits]:
        """The candidates the mode goes on with, as arrays for its statement: reranked (with a
        reranker), else the best of the merged candidates of several models' collections, or
        (``as_one_statement``) those the mode's one statement searches for.

        The arrays keep each hit's candidate-stage score beside the
        reranker's: a budget fitted in SQL weighs hits on the candidate
        stage's scale, whatever scale the reranker scores on.
        """
        reranker = self.settings.reranker
        search = self._search(question, query)
        if reranker is None:
            if as_one_statement:
                search, k = yield from self._one_statement_search(search)
            else:
                k = self._merged_k(search)
            rows = yield Fetch(*queries.plan_search(search, k, max_hit_share=self._hit_share()))
            hits = self._eligible([queries.to_hit(row) for row in rows])
            ids, scores = queries.hits_arrays(hits)
            return queries.GivenHits(ids, [h.document_id for h in hits], scores, scores)
        k = max(self.settings.rerank_candidates, self._hits_k())
        # (the reranker judges the evidence: it sees every candidate, not only those over the floor)
        rows = yield Fetch(*queries.plan_search(dataclasses.replace(search, min_relative_score=None), k))
        hits = self._eligible([queries.to_hit(row) for row in rows])
        best = yield Rerank(question, hits, reranker, self._rerank_keep(hits))
        candidate_score = {h.node_id: h.score for h in hits}
        ids, scores = queries.hits_arrays(best)
        return queries.GivenHits(ids, [h.document_id for h in best], scores,
                                 [candidate_score[h.node_id] for h in best])

    def _one_statement_search(self, search: queries.Search) -> Flow[tuple[queries.Search, int]]:
        """The search the mode's one statement makes, and how many candidates it reads."""
        yield from ()  # (a flow: a mode may ask the database how many)
        return search, self._merged_k(search)

    def _eligible(self, hits: list[SearchHit]) -> list[SearchHit]:
        """The candidates a reranker may choose from."""
        return hits

    def _merged_k(self, search: queries.Search) -> int:
        """How many merged candidates the mode reads, as its one-statement plan reads them."""
        return self._hits_k()

    def _hit_share(self) -> float | None:
        """The share of the collections the merged hits may be at most (auto-merge's max_hit_share)."""
        return None

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        """How many of the reranked candidates the mode goes on with."""
        return self._hits_k()

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        """The mode's statement for reranked hits: its results, or (``budget``) its context."""
        raise NotImplementedError

    # The drivers.  A statement that finds the question's model is no longer a searched collection's
    # (a reembed switched it since the model was looked up) is refused; the question is embedded again
    # with the model the collection holds now, once.
    def retrieve(self, question: str) -> list[RetrievalResult]:
        """The results; with ``max_tokens``, those that fit (see :meth:`context`)."""
        if self.settings.max_tokens is not None:
            return self.context(question).results
        return self._run(question, self.results_flow)

    def context(self, question: str) -> Context:
        """The results within ``max_tokens``, with what was dropped or replaced to fit."""
        return self._run(question, self.context_flow)

    async def aretrieve(self, question: str) -> list[RetrievalResult]:
        if self.settings.max_tokens is not None:
            return (await self.acontext(question)).results
        return await self._arun(question, self.results_flow)

    async def acontext(self, question: str) -> Context:
        return await self._arun(question, self.context_flow)

    def trace(self, question: str) -> Traced:
        """The context and the hits it was built from (:meth:`traced_flow`)."""
        return self._run(question, self.traced_flow)

    async def atrace(self, question: str) -> Traced:
        return await self._arun(question, self.traced_flow)

    def _answered(self, flow: Flow[T]) -> Flow[T]:
        """``flow``'s answer; when it is empty and a collection was named, NotFound if no such collection
        exists (or this role sees none), as every front end says it.  Asked only then: an answer costs no
        extra round trip."""
        answer = yield from flow
        context = answer.context if isinstance(answer, Traced) else answer
        if not (context.results or context.dropped) if isinstance(context, Context) else not context:
            yield from known_collection(self.settings.collection)
        return answer

    def _run(self, question: str, flow: Callable[[str, Query], Flow[T]]) -> T:
        for last in (False, True):
            query = self.reads.embed_query(question, self.settings.collection)
            try:
                return run(self._answered(flow(question, query)), self.reads.fetch)
            except ModelChanged:
                if last or self.reads.models_changed is None:
                    raise
                self.reads.models_changed()
        raise AssertionError("unreachable")

    async def _arun(self, question: str, flow: Callable[[str, Query], Flow[T]]) -> T:
        for last in (False, True):
            query = await asyncio.to_thread(self.reads.embed_query, question, self.settings.collection)
            try:
                return await arun(self._answered(flow(question, query)), self.reads.afetch)
            except ModelChanged:
                if last or self.reads.models_changed is None:
                    raise
                self.reads.models_changed()
        raise AssertionError("unreachable")


@dataclass(frozen=True)
class Traced:
    """A context and the hits the mode built it from (best first, with the scores the mode read)."""

    hits: queries.GivenHits
    context: Context


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
            kept.append(_as_part_of(owners[owner], queries.to_result("auto", row)))
            continue
        row.pop("reason")
        result = queries.to_result(mode, row)
        owners[owner] = result
        (kept if step == "whole" else dropped).append(result)
    return Context(results=kept, dropped=dropped, total_tokens=sum(r.token_count for r in kept), max_tokens=budget)


@dataclass(frozen=True)
class ParentChildRetriever(BaseRetriever[ParentChildSettings]):
    """Small-to-big: match children, return their whole parents (``hrag.parent_child``)."""

    def _plan(self, search: queries.Search) -> tuple[str, dict[str, Any]]:
        s = self.settings
        return queries.plan_parent_child(search, s.top_k_children, s.max_parents, s.min_score)

    def _hits_k(self) -> int:
        return self.settings.top_k_children

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        s = self.settings
        return queries.plan_parent_child_context(search, s.top_k_children, s.max_parents, s.min_score, budget)

    def _eligible(self, hits: list[SearchHit]) -> list[SearchHit]:
        floor = self.settings.min_score
        return hits if floor is None else [h for h in hits if h.score >= floor]

    def _rerank_keep(self, hits: list[SearchHit]) -> int:
        return len(hits)

    def _merged_k(self, search: queries.Search) -> int:
        # (the hybrid statement reads all its candidates, so parents beyond the first children are found)
        return search.candidate_count(self.settings.top_k_children)

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        s = self.settings
        if budget is None:
            return queries.plan_parent_child_hits(hits.ids, hits.scores, s.max_parents, s.top_k_children)
        return queries.plan_parent_child_hits_context(hits, s.max_parents, s.top_k_children, budget)


@dataclass(frozen=True)
class AutoMergingRetriever(BaseRetriever[AutoMergeSettings]):
    """Auto-merging: hit leaves, merge siblings into parents upward (``hrag.auto_merge``)."""

    def _plan(self, search: queries.Search) -> tuple[str, dict[str, Any]]:
        s = self.settings
        return queries.plan_auto_merge(search, s.top_k, s.merge_threshold, s.max_hit_share)

    def _hits_k(self) -> int:
        return self.settings.top_k

    def _context_plan(self, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
        s = self.settings
        return queries.plan_auto_merge_context(search, s.top_k, s.merge_threshold, s.max_hit_share, budget)

    def _hit_share(self) -> float | None:
        return self.settings.max_hit_share

    def _one_statement_search(self, search: queries.Search) -> Flow[tuple[queries.Search, int]]:
        # (hrag.sample_hits: top_k, or fewer on a small collection)
        rows = yield Fetch(*queries.plan_sample_hits(self.settings.top_k, search.collection,
                                                     self.settings.max_hit_share))
        return search, rows[0]["k"]

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        if budget is None:
            return queries.plan_auto_merge_hits(hits.ids, hits.scores, self.settings.merge_threshold)
        return queries.plan_auto_merge_hits_context(hits, self.settings.merge_threshold, budget)


@dataclass(frozen=True)
class AutoRetriever(BaseRetriever[BudgetSettings]):
    """The budget mode: the best non-overlapping context within ``max_tokens`` (``hrag.retrieve``).

    See :class:`hrag_pg.settings.BudgetSettings` for how it chooses.  With a
    ``reranker``, the candidates are rescored first and the selection runs
    on them (``hrag.retrieve_hits``).
    """

    def _budget(self) -> int:
        budget = self.settings.max_tokens
        assert budget is not None, "BudgetSettings refuses max_tokens=None"
        return budget

    def _plan(self, search: queries.Search) -> tuple[str, dict[str, Any]]:
        return queries.plan_retrieve(search, self.settings.top_k, self._budget())

    def _hits_k(self) -> int:
        return self.settings.top_k

    def _given_hits_plan(self, hits: queries.GivenHits, budget: int | None) -> tuple[str, dict[str, Any]]:
        return queries.plan_retrieve_hits(hits.ids, hits.scores, self._budget())

    def _one_statement_search(self, search: queries.Search) -> Flow[tuple[queries.Search, int]]:
        # (hrag.retrieve: the hybrid score over top_k vector candidates, whatever the lexical weight)
        yield from ()
        return dataclasses.replace(search, candidates=self.settings.top_k, min_relative_score=None,
                                   always_hybrid=True), self.settings.top_k

    def _context_of(self, rows: list[dict[str, Any]], budget: int | None) -> Context:
        results = [queries.to_result(self.mode, row) for row in rows]
        return Context(results=results, total_tokens=sum(r.token_count for r in results), max_tokens=self._budget())

    def context_flow(self, question: str, query: Query) -> Flow[Context]:
        """The selection already fits the budget (in stored token counts): nothing is dropped."""
        results = yield from self.results_flow(question, query)
        return Context(results=results, total_tokens=sum(r.token_count for r in results), max_tokens=self._budget())


_RETRIEVERS: dict[type[Settings], type[BaseRetriever[Any]]] = {
    ParentChildSettings: ParentChildRetriever,
    AutoMergeSettings: AutoMergingRetriever,
    BudgetSettings: AutoRetriever,
}


def retriever_for(reads: Reads, settings: Settings) -> BaseRetriever[Any]:
    """The retriever of the mode ``settings`` describe."""
    retriever = _RETRIEVERS.get(type(settings))
    if retriever is None:
        raise TypeError(f"settings must be ParentChildSettings, AutoMergeSettings or BudgetSettings, "
                        f"got {type(settings).__name__}")
    return retriever(reads, settings)
