"""Async reads on a ``psycopg_pool.AsyncConnectionPool``: the same SQL as the sync repository.

Concurrent retrievals each borrow their own connection (up to ``max_size``),
so sixteen ``aretrieve`` calls run side by side instead of queueing on one
locked connection.  A connection a failure broke is discarded when returned,
and a read whose pooled connection had died runs once more (see ``_fetch``).
A pool belongs to the event loop that opened it; called from another loop
(say, a second ``asyncio.run``) the repository opens a new pool for that
loop.  Writes stay on the sync repository: ingestion is CPU-bound embedding
work, not I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from . import queries
from .db import connection_error, libpq_url, operational_error, reconnect_failed
from .errors import ConnectionLost, from_database
from .models import RetrievalResult, SearchHit
from .repository import hits_arrays, to_hit, to_result

#: Connections the pool keeps open at most (each concurrent retrieval holds one for one statement).
DEFAULT_MAX_CONNECTIONS = 8
#: Seconds a retrieval waits for a free connection (or for the server) before failing.
CONNECT_TIMEOUT = 10.0
#: Seconds the one repeat of a read whose pooled connection had died waits for another.
RETRY_TIMEOUT = 1.0


async def _configure(conn: psycopg.AsyncConnection) -> None:
    from pgvector.psycopg import register_vector_async

    with contextlib.suppress(psycopg.ProgrammingError):  # not migrated yet: plain text I/O is fine
        await register_vector_async(conn)
    await conn.set_autocommit(True)  # reads only: no transaction left open between statements


class AsyncRepository:
    """Async counterpart of :class:`hrag_pg.repository.Repository` for retrieval."""

    def __init__(self, url: str, *, max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        self.url = url
        self.max_connections = max_connections
        self._pool: AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None

    async def pool(self) -> AsyncConnectionPool:
        """The pool of the running event loop, opened on first use."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop and not self._pool.closed:
            return self._pool
        if self._opening is None or self._loop is not loop:
            self._opening, self._loop, self._pool = asyncio.Lock(), loop, None
        async with self._opening:
            if self._pool is None:
                pool = AsyncConnectionPool(
                    libpq_url(self.url), min_size=1, max_size=self.max_connections, open=False,
                    configure=_configure, timeout=CONNECT_TIMEOUT,
                    name="hrag-async",
                )
                try:
                    await pool.open(wait=True, timeout=CONNECT_TIMEOUT)
                except psycopg.OperationalError as exc:
                    await pool.close()
                    raise connection_error(self.url, exc) from exc
                self._pool = pool
        assert self._pool is not None
        return self._pool

    async def _fetch(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """One read statement on a pooled connection (the pool does not ping it first).

        A pooled connection can have died since its last use (the server
        restarted, its backend was terminated); then the pool's idle
        connections are checked, dropping the dead ones, and the statement
        runs once more, which a read allows, waiting at most RETRY_TIMEOUT for
        a connection (a server that is down should fail the call at once, not
        after CONNECT_TIMEOUT).  If the repeat fails too, the caller gets both
        failures.
        """
        pool = await self.pool()
        try:
            return await self._fetch_once(pool, sql, params)
        except ConnectionLost as lost:
            if not lost.dead_connection:
                raise
            first = lost
        await pool.check()
        try:
            return await self._fetch_once(pool, sql, params, timeout=RETRY_TIMEOUT)
        except ConnectionLost as second:
            reason = str(second.__cause__ or second).strip().splitlines() or [type(second).__name__]
            raise reconnect_failed(first, reason[0]) from None

    async def _fetch_once(self, pool: AsyncConnectionPool, sql: str, params: dict[str, Any], *,
                          timeout: float | None = None) -> list[dict[str, Any]]:
        try:
            async with pool.connection(timeout=timeout) as conn:
                try:
                    async with conn.cursor(row_factory=dict_row) as cur:
                        await cur.execute(sql, params)
                        return await cur.fetchall()
                except psycopg.errors.DataError as exc:
                    raise from_database(exc) from exc
                except psycopg.OperationalError as exc:
                    # (the pool discards the broken connection when it is returned)
                    raise operational_error(self.url, exc, dead_connection=conn.broken or conn.closed) from exc
        except psycopg.OperationalError as exc:
            # A server restart, a cancelled statement or no free connection in time:
            # one clear sentence.
            raise operational_error(self.url, exc) from exc

    async def search(self, search: queries.Search, k: int = 20) -> list[SearchHit]:
        """The ANN step alone (hybrid-rescored when the search asks for it)."""
        return [to_hit(row) for row in await self._fetch(*queries.plan_search(search, k))]

    async def parent_child(self, search: queries.Search, *, top_k_children: int = 20, max_parents: int = 4,
                           min_score: float | None = None) -> list[RetrievalResult]:
        rows = await self._fetch(*queries.plan_parent_child(search, top_k_children, max_parents, min_score))
        return [to_result("parent-child", row) for row in rows]

    async def auto_merge(self, search: queries.Search, *, top_k: int = 12,
                         merge_threshold: float = 0.5,
                         max_hit_share: float | None = None) -> list[RetrievalResult]:
        rows = await self._fetch(*queries.plan_auto_merge(search, top_k, merge_threshold, max_hit_share))
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
        """Close the pool of the running loop (a pool of a finished loop is dropped)."""
        pool, self._pool = self._pool, None
        if pool is not None and self._loop is asyncio.get_running_loop():
            await pool.close()
