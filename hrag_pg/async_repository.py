"""Async reads on a ``psycopg_pool.AsyncConnectionPool``: the same SQL as the sync repository.

Concurrent retrievals each borrow their own connection (up to ``max_size``),
so sixteen ``aretrieve`` calls run side by side instead of queueing on one
locked connection.  A connection a failure broke is discarded when returned,
and a read whose pooled connection had died runs once more (see ``fetch``).
A pool belongs to the event loop that opened it; called from another loop
(say, a second ``asyncio.run``) the repository opens a new pool for that
loop.  Writes stay on the sync repository: ingestion is CPU-bound embedding
work, not I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from .db import connection_error, libpq_url, operational_error, reconnect_failed
from .errors import ConnectionLost, from_database

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

    async def fetch(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
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

    async def close(self) -> None:
        """Close the pool of the running loop (a pool of a finished loop is dropped)."""
        pool, self._pool = self._pool, None
        if pool is not None and self._loop is asyncio.get_running_loop():
            await pool.close()
