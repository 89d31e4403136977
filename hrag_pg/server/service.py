"""What the server does, on one :class:`~hrag_pg.api.AsyncHRAG`: the HTTP API and the MCP tools both call this.

Every check and message is the CLI's (``hrag query``, ``hrag sources``,
``hrag show``, ``hrag delete``), and every payload is what the CLI's
``--json`` prints for the same request, so a script sees one format whichever
way it asks.  Retrievals run on the facade's async connection pool (the
question is embedded in a worker thread); the other reads and the writes run
the sync facade in worker threads, so the event loop keeps serving meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any, TypeVar

from .. import argument_limits, defaults, migrate, settings
from ..api import HRAG, AsyncHRAG
from ..argument_limits import check_question
from ..errors import HragError, NotFound
from ..ingest.text import TextFormat

logger = logging.getLogger("hrag_pg.server")

T = TypeVar("T")

#: Settings taken by flat name (``settings.for_mode``), with the check each value gets first.
COUNT_SETTINGS = ("top_k", "top_k_children", "max_parents", "candidates", "rerank_candidates")
FRACTION_SETTINGS = {"merge_threshold": False, "min_relative_score": False, "max_hit_share": False,
                     "lexical_weight": True}  # name -> zero allowed
#: Settings that are Python objects, not JSON values.
PYTHON_ONLY_SETTINGS = ("reranker",)


def check_settings(options: dict[str, Any]) -> None:
    """The ranges the CLI checks, named as the Python API names them (``top_k``, not ``--top-k``)."""
    for name, value in options.items():
        if name in PYTHON_ONLY_SETTINGS:
            raise ValueError(f"{name} is a Python object; it cannot be set through the server")
        if value is None:
            continue
        if name in COUNT_SETTINGS:
            argument_limits.check_count(value, name)
        elif name in FRACTION_SETTINGS:
            argument_limits.check_fraction(value, name, zero_allowed=FRACTION_SETTINGS[name])
        elif name == "min_score" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
            raise ValueError(f"min_score must be a number, got {value!r}")


def result_payload(result: Any) -> dict[str, Any]:
    """One result as ``hrag query --json`` prints it, plus its ``rank`` (what the CLI's text output shows)."""
    from ..cli.output import result_json

    return {**result_json(result), "rank": result.rank}


class Service:
    """The server's operations on one facade (opened by the caller, closed by :meth:`close`)."""

    def __init__(self, facade: AsyncHRAG) -> None:
        self.facade = facade
        self.model_loaded = False
        self.model_error: str | None = None

    @property
    def hrag(self) -> HRAG:
        return self.facade.hrag

    async def _thread(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await asyncio.to_thread(func, *args, **kwargs)

    # ---------------------------------------------------------------- lifetime

    async def warm_up(self) -> None:
        """Load the model questions will need (the collections' recorded one), so the first answer is fast."""
        from ..embedding import embed_queries

        def load() -> None:
            try:
                embedder = self.hrag.query_embedder(None)
            except HragError:  # collections of several models: each loads on its first question
                embedder = self.hrag.embedder
            embed_queries(embedder, ["warm-up"])

        try:
            await self._thread(load)
        except HragError as exc:
            self.model_error = str(exc)
            logger.warning("the embedding model did not load: %s", exc)
        else:
            self.model_loaded = True

    async def close(self) -> None:
        await self.facade.close()
        await self._thread(self.hrag.close)

    # ---------------------------------------------------------------- reads

    async def check_collection(self, collection: str | None) -> None:
        """A collection that does not exist (or this role cannot see) is NotFound naming those that do."""
        from ..cli.core import check_collection

        await self._thread(check_collection, self.hrag, collection)

    async def retrieve(self, question: str, *, mode: str | None = None, max_tokens: int | None = None,
                       collection: str | None = None, filter: dict[str, Any] | None = None,
                       **options: Any) -> dict[str, Any]:
        """``hrag query --json``'s object: the mode, the results and, with a budget, total_tokens and dropped."""
        mode = settings.chosen_mode(mode)
        if mode == "auto" and max_tokens is None:
            max_tokens = defaults.MAX_TOKENS
        check_question(question)
        if max_tokens is not None:
            argument_limits.check_count(max_tokens, "max_tokens", maximum=argument_limits.MAX_CONTEXT_TOKENS)
        if filter is not None and not isinstance(filter, dict):
            raise ValueError(f"filter must be a JSON object, got {type(filter).__name__}")
        check_settings(options)
        scope: dict[str, Any] = {"collection": collection, "filter": filter}
        if max_tokens is not None:
            scope["max_tokens"] = max_tokens
        try:
            chosen = settings.for_mode(mode, **scope, **options)
        except TypeError as exc:  # a setting of another mode, or none at all: say which
            raise ValueError(str(exc)) from None
        context = await self.facade.context(question, chosen)
        if not context.results and collection is not None:
            # Nothing found may mean no such collection: that costs a round trip only then, not per question.
            await self.check_collection(collection)
        payload: dict[str, Any] = {"mode": mode, "results": [result_payload(r) for r in context.results]}
        if max_tokens is not None:
            payload["total_tokens"] = context.total_tokens
            payload["dropped"] = [result_payload(r) for r in context.dropped]
        return payload

    async def sources(self, collection: str | None = None) -> list[dict[str, Any]]:
        """``hrag sources --json``: every stored document (or a collection's), with its collection's model."""
        from ..cli.core import sources_json

        rows = await self._thread(sources_json, self.hrag, collection)
        if not rows:
            await self.check_collection(collection)  # nothing stored there may mean no such collection
        return rows

    async def node(self, node_id: str) -> dict[str, Any]:
        """``hrag show --json``: the node, its full text (its subtree's) and its children."""
        from ..cli.core import node_json

        payload = await self._thread(node_json, self.hrag, node_id)
        if payload is None:
            raise NotFound(f"no node {node_id} in this database")
        return payload

    async def health(self) -> dict[str, Any]:
        """Database reachable (through the pool), its schema revision against this hrag-pg's, the model."""
        from .. import __version__

        rows = await self.facade.repository.fetch("SELECT version_num FROM hrag.alembic_version", {})
        revision = rows[0]["version_num"] if rows else None
        head = migrate.head_revision()
        return {"status": "ok" if revision == head else "schema behind", "database": "reachable",
                "schema_revision": revision, "head_revision": head, "model_loaded": self.model_loaded,
                "model_error": self.model_error, "version": __version__}

    # ---------------------------------------------------------------- writes

    async def ingest(self, *, text: str, source: str, collection: str = "default",
                     metadata: dict[str, Any] | None = None, format: TextFormat = "markdown",
                     strategy: str | None = None) -> dict[str, Any]:
        """``HRAG.ingest_text``: one transaction; bad input is refused before anything is written."""
        if not collection.strip():
            raise ValueError("collection must not be empty")
        result = await self._thread(self.hrag.ingest_text, text, source=source, collection=collection,
                                    metadata=metadata, format=format, strategy=strategy)
        return result.model_dump(mode="json")

    async def delete(self, source: str, collection: str = "default") -> dict[str, Any]:
        """``hrag delete``: the source and its whole tree, one transaction; NotFound says where it is instead."""
        if not await self._thread(self.hrag.delete, source, collection):
            elsewhere = await self._thread(self.hrag.repository.collections_of, source)
            where = (f"; it is stored in collection{'s' if len(elsewhere) > 1 else ''} "
                     + ", ".join(repr(c) for c in elsewhere) + " (pass collection)") if elsewhere else \
                "; GET /sources lists what is stored"
            raise NotFound(f"no source {source!r} in collection {collection!r}{where}")
        return {"deleted": source, "collection": collection}

    async def outline(self, *, collection: str | None = None, source: str | None = None,
                      max_depth: int = 3) -> list[dict[str, Any]]:
        """``hrag outline --json``: the heading tree of the stored documents (a collection's, one source's)."""
        # (an unknown source is InvalidArgument, 400, as it is a usage error for `hrag outline`)
        entries = await self.facade.outline(collection=collection, source=source, max_depth=max_depth)
        if not entries:
            await self.check_collection(collection)
        return [e.model_dump(mode="json") for e in entries]
