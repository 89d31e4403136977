"""Async reads on psycopg's AsyncConnection: the same SQL as the sync repository.

One connection per instance, used by one coroutine at a time (an asyncio
lock), reopened transparently if the server dropped it.  Writes stay on the
sync repository: ingestion is CPU-bound embedding work, not I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import queries
from .db import connection_error, libpq_url, operational_error
from .errors import from_database
from .models import RetrievalResult, SearchHit
from .repository import hits_arrays, to_hit, to_result


class AsyncRepository:
    """Async counterpart of :class:`hrag_pg.repository.Repository` for retrieval."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._conn: psycopg.AsyncConnection | None = None
        self._lock = asyncio.Lock()

    async def _connection(self) -> psycopg.AsyncConnection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            from pgvector.psycopg import register_vector_async

            try:
                self._conn = await psycopg.AsyncConnection.connect(libpq_url(self.url))
            except psycopg.OperationalError as exc:
                raise connection_error(self.url, exc) from exc
            await register_vector_async(self._conn)
        return self._conn

    async def _fetch(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        async with self._lock:
            conn = await self._connection()
            try:
                async with conn.cursor(row_factory=dict_row) as cur:
                    await cur.execute(sql, params)
                    rows = await cur.fetchall()
            except psycopg.errors.DataError as exc:
                raise from_database(exc) from exc
            except psycopg.OperationalError as exc:
                # A server restart, a terminated backend or a cancelled statement: one clear
                # sentence; a broken connection is reopened by the next call.
                raise operational_error(self.url, exc) from exc
            finally:
                if not conn.broken and not conn.closed:
                    await conn.rollback()
        return rows

    async def search(self, search: queries.Search, k: int = 20) -> list[SearchHit]:
        """The ANN step alone (hybrid-rescored when the search asks for it)."""
        return [to_hit(row) for row in await self._fetch(*queries.plan_search(search, k))]

    async def parent_child(self, search: queries.Search, *, top_k_children: int = 20, max_parents: int = 4,
                     min_score: float | None = None) -> list[RetrievalResult]:
        rows = await self._fetch(*queries.plan_parent_child(search, top_k_children, max_parents, min_score))
        return [to_result("parent-child", row) for row in rows]

    async def auto_merge(self, search: queries.Search, *, top_k: int = 12,
                   merge_threshold: float = 0.5) -> list[RetrievalResult]:
        rows = await self._fetch(*queries.plan_auto_merge(search, top_k, merge_threshold))
        return [to_result("auto-merge", row) for row in rows]

    async def auto_merge_hits(self, hits: Sequence[SearchHit], merge_threshold: float = 0.5) -> list[RetrievalResult]:
        ids, scores = hits_arrays(hits)
        rows = await self._fetch(*queries.plan_auto_merge_hits(ids, scores, merge_threshold))
        return [to_result("auto-merge", row) for row in rows]

    async def parent_child_hits(self, hits: Sequence[SearchHit], max_parents: int = 4,
                          top_k_children: int | None = None) -> list[RetrievalResult]:
        ids, scores = hits_arrays(hits)
        rows = await self._fetch(*queries.plan_parent_child_hits(ids, scores, max_parents, top_k_children))
        return [to_result("parent-child", row) for row in rows]

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
