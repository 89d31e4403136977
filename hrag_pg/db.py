"""The one module that owns database URLs, engines and connections.

Everything else asks this module for an engine; nothing else reads
``HRAG_DATABASE_URL`` or starts the embedded server.  Connection failures are
translated into one-sentence :class:`~hrag_pg.errors.ConfigurationError`
messages that name the server and the fix.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from functools import lru_cache, partial
from urllib.parse import unquote_plus

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection

from .errors import (
    MODEL_CHANGED_SQLSTATE,
    ConfigurationError,
    ConnectionLost,
    HragError,
    ModelChanged,
    QueryCancelled,
    SchemaError,
)

ENV_URL = "HRAG_DATABASE_URL"


def sqlalchemy_url(url: str) -> str:
    """Normalise any PostgreSQL URL to the psycopg 3 SQLAlchemy dialect."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise ConfigurationError(
        f"Not a PostgreSQL URL: {redact(url)!r}; expected postgresql://user:password@host:port/dbname."
    )


def libpq_url(url: str) -> str:
    """The same URL in the form psql and psycopg.connect() accept."""
    return "postgresql://" + sqlalchemy_url(url)[len("postgresql+psycopg://"):]


def redact(url: str) -> str:
    """Hide the password so URLs can appear in error messages and logs.

    The query is shown decoded (``host=/tmp/x y/pgdata``, not ``host=%2Ftmp%2Fx+y%2Fpgdata``):
    it is read by people, who look for the socket directory they know.
    """
    try:
        rendered = make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL is shown as given
        return url
    base, _, query = rendered.partition("?")
    return f"{base}?{unquote_plus(query)}" if query else base


def resolve_url(url: str | None = None, *, start_embedded: bool = True) -> str:
    """The database to use: an explicit URL, ``HRAG_DATABASE_URL``, or the embedded server."""
    url = url or os.environ.get(ENV_URL) or None
    if url:
        return sqlalchemy_url(url.strip())
    from . import embedded_server

    if start_embedded:
        return embedded_server.start().url()
    return embedded_server.status().url()


def _register_vector(dbapi_connection: psycopg.Connection, _record: object) -> None:
    # The vector type exists only once migrated; before that, plain text I/O is fine.
    from pgvector.psycopg import register_vector

    with contextlib.suppress(psycopg.ProgrammingError):
        register_vector(dbapi_connection)


#: Set while a caller takes a pooled connection without the ping (see :func:`unpinged_checkout`).
_unpinged: ContextVar[bool] = ContextVar("hrag_unpinged_checkout", default=False)


@contextlib.contextmanager
def unpinged_checkout() -> Iterator[None]:
    """Connections taken from the pool inside this block are not pinged first.

    The ping (what ``pool_pre_ping`` does) is a round trip before every call:
    on a 3 ms retrieval, a few percent of it.  Only a caller that can repeat
    its statement when the connection turns out dead (a read) skips it.
    """
    token = _unpinged.set(True)
    try:
        yield
    finally:
        _unpinged.reset(token)


def _ping_on_checkout(dialect: sa.Dialect, dbapi_connection: DBAPIConnection, _record: object,
                      _proxy: object) -> None:
    """pool_pre_ping, unless :func:`unpinged_checkout` is active.

    A dead connection (the server restarted since it was pooled) raises
    InvalidatePoolError: the pool then drops every connection it holds that is
    as old, and hands out a new one.
    """
    if _unpinged.get():
        return
    try:
        dialect.do_ping(dbapi_connection)
    except psycopg.OperationalError as exc:
        raise sa.exc.InvalidatePoolError(str(exc)) from exc


@lru_cache(maxsize=16)
def _engine_for(url: str) -> Engine:
    engine = sa.create_engine(url, pool_size=5, max_overflow=10)
    sa.event.listen(engine, "connect", _register_vector)
    sa.event.listen(engine, "checkout", partial(_ping_on_checkout, engine.dialect))
    return engine


def engine(url: str | None = None) -> Engine:
    """A pooled engine (one per URL per process) with pgvector adapters registered."""
    return _engine_for(resolve_url(url))


def connection_error(url: str, exc: BaseException) -> ConfigurationError:
    """Turn a driver's connection failure into one sentence that names server and fix."""
    reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ConfigurationError(
        f"Cannot connect to PostgreSQL at {redact(url)} ({reason}); check {ENV_URL}, "
        "or unset it to use the embedded server."
    )


def operational_error(url: str, exc: BaseException, *, dead_connection: bool = False) -> HragError:
    """A driver failure *during* a call (not while connecting) as one clear sentence.

    A cancelled statement (``statement_timeout``, a cancel request) becomes
    :class:`QueryCancelled`; a collection switched to another model since the
    question was embedded (``hrag._checked_collection``) :class:`ModelChanged`;
    anything else that breaks the connection (a server restart, a terminated
    backend) becomes :class:`ConnectionLost`.
    """
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "sqlstate", None) == MODEL_CHANGED_SQLSTATE:
        # (hrag._checked_collection's refusal: psycopg files an SQLSTATE it does not know as operational)
        return ModelChanged(getattr(getattr(orig, "diag", None), "message_primary", None) or str(orig))
    reason = (str(orig).strip().splitlines() or [type(orig).__name__])[0]
    if isinstance(orig, psycopg.errors.QueryCanceled):
        return QueryCancelled(
            f"PostgreSQL cancelled the statement ({reason}); nothing was changed. Retry, or raise "
            "statement_timeout if the server's limit is too low."
        )
    return ConnectionLost(
        f"The connection to PostgreSQL at {redact(url)} was lost during the call ({reason}); "
        "the call did not complete. Retry: the next call reconnects.",
        dead_connection=dead_connection,
    )


def reconnect_failed(first: ConnectionLost, why: str) -> ConnectionLost:
    """A read lost its connection, and its one repeat could not get another: both, in one message."""
    return ConnectionLost(f"{first} Reconnecting failed as well: {why.rstrip('.')}.", dead_connection=True)


def check_reachable(url: str) -> None:
    """Open and close one connection, raising a clear error if the server is unreachable."""
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        raise connection_error(url, exc) from exc


def installed_embedding_dim(conn: sa.Connection) -> int:
    """The embedding dimension recorded at migration time, or a clear error if not migrated."""
    exists = conn.execute(sa.text("SELECT to_regclass('hrag.config') IS NOT NULL")).scalar()
    if not exists:
        raise SchemaError(
            "The database has no hrag schema yet: run `hrag migrate` (or `alembic upgrade head`)."
        )
    return int(conn.execute(sa.text("SELECT embedding_dim FROM hrag.config")).scalar_one())
