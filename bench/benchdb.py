"""The benchmark's own databases: the embedded server in bench/.data, or HRAG_BENCH_DATABASE_URL.

Every benchmark database is dropped and created afresh, then migrated, so a
run never measures what a previous run left behind.  With
``HRAG_BENCH_DATABASE_URL`` (a server with pgvector; its database name is
used as the maintenance database) the same databases are created there.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from hrag_pg import db, embedded_server, migrate

ENV_URL = "HRAG_BENCH_DATABASE_URL"


def with_database(url: str, name: str) -> str:
    """The same server's URL with another database."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def database_url(data_dir: Path, name: str) -> str:
    """A libpq URL of the benchmark database ``name`` (starting the embedded server if needed)."""
    return with_database(maintenance_url(data_dir), name)


def maintenance_url(data_dir: Path) -> str:
    """A libpq URL of the maintenance database (starting the embedded server if needed)."""
    external = os.environ.get(ENV_URL)
    if external:
        return db.libpq_url(external)
    server = embedded_server.start(data_dir)
    return server.url(driver=False, database="postgres")


def fresh_database(data_dir: Path, name: str, *, migrated: bool = True) -> str:
    """Drop and create database ``name``; return its SQLAlchemy URL (migrated to head)."""
    admin = maintenance_url(data_dir)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    url = db.sqlalchemy_url(with_database(admin, name))
    if migrated:
        migrate.upgrade(url)
    return url


def server_settings(url: str) -> dict[str, str]:
    names = ("server_version", "shared_buffers", "work_mem", "maintenance_work_mem",
             "max_parallel_maintenance_workers", "max_parallel_workers_per_gather")
    with psycopg.connect(db.libpq_url(url)) as conn:
        rows = conn.execute("SELECT n, current_setting(n) FROM unnest(%s::text[]) AS n", (list(names),))
        out = dict(rows)
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        out["pgvector"] = row[0] if row else "not installed"
    return out


def downgraded_copy(admin: str, database: str, revision: str) -> str:
    """Copy ``database`` (at head) as ``<database>_<revision>``, downgrade the copy; return the copy's name.

    The A/B studies compare head with an earlier revision on the same rows,
    so the copy is made afresh from the database each time.
    """
    copy = f"{database}_{revision}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{copy}" TEMPLATE "{database}"')
    migrate.downgrade(db.sqlalchemy_url(with_database(admin, copy)), revision)
    return copy
