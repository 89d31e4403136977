"""The server's state and operations on one :class:`~hrag_pg.api.AsyncHRAG`; the HTTP API and MCP call it.

The reading operations are :mod:`hrag_pg.operations`' (the same checks,
errors and shapes as the CLI and the facade), run by an
:class:`~hrag_pg.operations.reading.AsyncReader`: statements on the facade's
async connection pool, the question's embedding and the writes in worker
threads, so the event loop keeps serving meanwhile.  What is the server's
own: loading the model at start, and reporting its health.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .. import migrate
from ..api import HRAG, AsyncHRAG
from ..errors import HragError, InvalidArgument
from ..ingest.text import TextFormat
from ..models import IngestResult, OutlineEntry
from ..operations.question import Question
from ..operations.shapes import Answer, Deleted, Inspection, NodeView, SourceEntry

logger = logging.getLogger("hrag_pg.server")


class Service:
    """The server's operations on one facade (opened by the caller, closed by :meth:`close`)."""

    def __init__(self, facade: AsyncHRAG) -> None:
        self.facade = facade
        self.reader = facade.reader
        self.model_loaded = False
        self.model_error: str | None = None

    @property
    def hrag(self) -> HRAG:
        return self.facade.hrag

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
            await asyncio.to_thread(load)
        except HragError as exc:
            self.model_error = str(exc)
            logger.warning("the embedding model did not load: %s", exc)
        else:
            self.model_loaded = True

    async def close(self) -> None:
        await self.facade.close()
        await asyncio.to_thread(self.hrag.close)

    # ---------------------------------------------------------------- reads

    async def retrieve(self, question: Question) -> Answer:
        return await self.reader.retrieve(question)

    async def inspect(self, question: Question) -> Inspection:
        return await self.reader.inspect(question)

    async def sources(self, collection: str | None = None) -> list[SourceEntry]:
        return await self.reader.sources(collection)

    async def node(self, node_id: str) -> NodeView:
        return await self.reader.node(node_id)

    async def outline(self, *, collection: str | None = None, source: str | None = None,
                      max_depth: int = 3) -> list[OutlineEntry]:
        return await self.reader.outline(collection=collection, source=source, max_depth=max_depth)

    async def health(self) -> dict[str, Any]:
        """Database reachable (through the pool), its schema revision against this hrag-pg's, the model."""
        from .. import __version__

        revision = await self.reader.schema_revision()
        head = migrate.head_revision()
        return {"status": "ok" if revision == head else "schema behind", "database": "reachable",
                "schema_revision": revision, "head_revision": head, "model_loaded": self.model_loaded,
                "model_error": self.model_error, "version": __version__}

    # ---------------------------------------------------------------- writes

    async def ingest(self, *, text: str, source: str, collection: str = "default",
                     metadata: dict[str, Any] | None = None, format: TextFormat = "markdown",
                     strategy: str | None = None) -> IngestResult:
        """The writing operation ``ingest_text``: one transaction; bad input is refused before anything is
        written."""
        if not collection.strip():
            raise InvalidArgument("collection must not be empty", field="collection")
        return await asyncio.to_thread(self.hrag.writer.ingest_text, text, source=source, collection=collection,
                                       metadata=metadata, format=format,
                                       strategy=strategy)  # type: ignore[arg-type]  # (checked by the parser)

    async def delete(self, source: str, collection: str = "default") -> Deleted:
        return await self.reader.delete(source, collection)
