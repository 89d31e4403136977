"""The reading operations: ask (and inspect an answer), read a node, outline, list sources, delete a source.

Each is written once.  Its arguments are checked in one place (the settings
objects and :class:`Question`), by the names Python and JSON use, and every
failure is one of the project's typed errors (:class:`~hrag_pg.errors.NotFound`,
:class:`~hrag_pg.errors.InvalidArgument`, ...), which the CLI, the HTTP API,
MCP and the Python facade each map in one place (exit code, status, tool
error, exception).  The statements are sans-IO flows (:mod:`hrag_pg.retrievers`'
:class:`~hrag_pg.retrievers.Fetch` requests), run by :class:`Reader` on the
sync repository and by :class:`AsyncReader` on the async pool, so the two
cannot diverge.  The answers are the shapes of :mod:`hrag_pg.operations.shapes`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import queries
from ..argument_limits import check_node_id
from ..collection_model import as_json
from ..errors import InvalidArgument, NotFound
from ..models import Context, OutlineEntry
from ..retrievers import BaseRetriever, Fetch, Flow, Traced, arun, known_collection, run
from ..settings import Settings
from .question import Question
from .shapes import Answer, ChildEntry, Deleted, Hit, Inspection, NodeView, SourceEntry, TreeNode

if TYPE_CHECKING:  # pragma: no cover
    from ..async_repository import AsyncRepository
    from ..repository import Repository

#: Characters of a child's text its ``lead`` is made from.
LEAD_CHARS = 60


def answer(settings: Settings, context: Context) -> Answer:
    return Answer(mode=settings.mode, max_tokens=settings.max_tokens, total_tokens=context.total_tokens,
                  results=context.results, dropped=context.dropped)


def lead(text: str, length: int = LEAD_CHARS) -> str:
    """The start of a text on one line (line breaks and runs of spaces collapsed), from its first line with
    a letter or digit: a rule of ``=====`` or ``~~~~~`` above a plain-text section tells nothing apart."""
    lines = text.splitlines()
    first = next((i for i, line in enumerate(lines) if any(c.isalnum() for c in line)), 0)
    flat = " ".join(" ".join(lines[first:]).split())
    return flat if len(flat) <= length else flat[:length] + "…"


# ------------------------------------------------------------------ flows


def node_flow(node_id: Any) -> Flow[NodeView]:
    """One node, its full text and its children: one statement (``queries.READ_NODE``)."""
    parsed = check_node_id(node_id)
    rows = yield Fetch(queries.READ_NODE, {"node_id": parsed})
    if not rows:
        raise NotFound(f"no node {parsed} in this database")
    row = dict(rows[0])
    children = [ChildEntry(**{**c, "lead": lead(c.pop("text_start") or "")}) for c in row.pop("children")]
    return NodeView(**row, children=children)


def outline_flow(collection: str | None, source: str | None, max_depth: int) -> Flow[list[OutlineEntry]]:
    """The heading tree (one collection, one source, or all); an unknown collection is NotFound."""
    rows = yield Fetch(queries.OUTLINE, queries.outline_params(collection, source, max_depth))
    entries = [queries.to_outline_entry(r) for r in rows]
    if not entries:
        yield from known_collection(collection)
    return entries


def inspection_flow(question: Question, settings: Settings, traced: Traced) -> Flow[Inspection]:
    """An answer made visible: its hits, its passages and the documents' map around them (one statement,
    ``queries.INSPECTION_TREE``)."""
    context = traced.context
    hits = [Hit(node_id=node_id, document_id=document_id, score=score, rank=rank)
            for rank, (node_id, document_id, score)
            in enumerate(zip(traced.hits.ids, traced.hits.document_ids, traced.hits.scores, strict=True), 1)]
    rows = yield Fetch(queries.INSPECTION_TREE, {
        "hit_ids": [h.node_id for h in hits], "hit_scores": [h.score for h in hits],
        "passage_ids": [r.node_id for r in context.results]})
    tree = [TreeNode(**row, lead=lead(row.pop("text_start") or "")) for row in rows]
    return Inspection(question=question.text, settings=settings_fields(settings), answer=answer(settings, context),
                      reasons=[r.explanation() for r in context.results], hits=hits, tree=tree)


def settings_fields(settings: Settings) -> dict[str, Any]:
    """A mode's settings by their flat names, as JSON values (the reranker by its class, the filter as given)."""
    fields: dict[str, Any] = {"mode": settings.mode}
    for field in dataclasses.fields(settings):
        value = getattr(settings, field.name)
        fields[field.name] = value if value is None or isinstance(value, (bool, int, float, str, dict)) \
            else type(value).__name__
    return fields


def schema_revision_flow() -> Flow[str | None]:
    """The schema's migration revision (None: not installed)."""
    rows = yield Fetch(queries.SCHEMA_REVISION, {})
    return rows[0]["version_num"] if rows else None


# ------------------------------------------------------------------ the sync and async readers


def stored_sources(repository: Repository, collection: str | None) -> list[dict[str, Any]]:
    """The stored documents' rows (of ``collection``, None: all); none: NotFound naming the collections
    that exist, unless the collection is one (a role may see none of its documents)."""
    rows = repository.sources(collection)
    if not rows:
        run(known_collection(collection), repository.fetch)
    return rows


class Reader:
    """The reading operations in-process and sync: on a repository, with the facade's retrievers
    (:attr:`hrag_pg.api.HRAG.reader` makes one)."""

    def __init__(self, repository: Repository, retriever: Callable[[Settings], BaseRetriever[Any]]) -> None:
        self.repository = repository
        self.retriever = retriever

    def retrieve(self, question: Question) -> Answer:
        settings = question.plan()
        return answer(settings, self.retriever(settings).context(question.text))

    def inspect(self, question: Question) -> Inspection:
        """The answer :meth:`retrieve` gives, with the hits it was built from and the documents' map around
        them: what the inspector page draws."""
        settings = question.plan()
        traced = self.retriever(settings).trace(question.text)
        return run(inspection_flow(question, settings, traced), self.repository.fetch)

    def node(self, node_id: Any) -> NodeView:
        return run(node_flow(node_id), self.repository.fetch)

    def outline(self, collection: str | None = None, source: str | None = None,
                max_depth: int = 3) -> list[OutlineEntry]:
        return run(outline_flow(collection, source, max_depth), self.repository.fetch)

    def require_collection(self, collection: str | None) -> None:
        """NotFound naming the collections that exist, unless ``collection`` is one (None: any)."""
        run(known_collection(collection), self.repository.fetch)

    def sources(self, collection: str | None = None) -> list[SourceEntry]:
        rows = stored_sources(self.repository, collection)
        models = self.repository.collection_models([collection] if collection is not None else None)
        return [SourceEntry(**r, model=as_json(models[r["collection"]]) if r["collection"] in models else None)
                for r in rows]

    def delete(self, source: str, collection: str = "default") -> Deleted:
        """The source and its whole tree, one transaction; NotFound says where it is stored instead."""
        if not isinstance(source, str) or not source.strip():
            raise InvalidArgument("source must not be empty", field="source")
        if not isinstance(collection, str) or not collection.strip():
            raise InvalidArgument("collection must not be empty", field="collection")
        if not self.repository.delete_source(source, collection):
            elsewhere = self.repository.collections_of(source)
            where = (f"; it is stored in collection{'s' if len(elsewhere) > 1 else ''} "
                     + ", ".join(repr(c) for c in elsewhere) + " (give its collection)") if elsewhere else \
                "; the sources list shows what is stored"
            raise NotFound(f"no source {source!r} in collection {collection!r}{where}")
        return Deleted(deleted=source, collection=collection)


class AsyncReader:
    """The same operations on an event loop: the statements on the async connection pool, the rest (the
    question's embedding, the writes) in worker threads, so the loop keeps serving
    (:attr:`hrag_pg.api.AsyncHRAG.reader` makes one)."""

    def __init__(self, reader: Reader, repository: AsyncRepository) -> None:
        self._sync = reader
        self.repository = repository

    async def retrieve(self, question: Question) -> Answer:
        settings = question.plan()
        return answer(settings, await self._sync.retriever(settings).acontext(question.text))

    async def inspect(self, question: Question) -> Inspection:
        settings = question.plan()
        traced = await self._sync.retriever(settings).atrace(question.text)
        return await arun(inspection_flow(question, settings, traced), self.repository.fetch)

    async def node(self, node_id: Any) -> NodeView:
        return await arun(node_flow(node_id), self.repository.fetch)

    async def outline(self, collection: str | None = None, source: str | None = None,
                      max_depth: int = 3) -> list[OutlineEntry]:
        return await arun(outline_flow(collection, source, max_depth), self.repository.fetch)

    async def sources(self, collection: str | None = None) -> list[SourceEntry]:
        return await asyncio.to_thread(self._sync.sources, collection)

    async def schema_revision(self) -> str | None:
        return await arun(schema_revision_flow(), self.repository.fetch)

    async def delete(self, source: str, collection: str = "default") -> Deleted:
        return await asyncio.to_thread(self._sync.delete, source, collection)
