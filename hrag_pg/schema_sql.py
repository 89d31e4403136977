"""Reading and applying the SQL files in ``sql/`` (the single source of truth).

Each Alembic revision is a thin wrapper that calls :func:`apply` with the
file(s) it owns.  Files are plain SQL with ``{{name}}`` placeholders; the
only placeholder today is ``{{embedding_dim}}``, fixed per installation.
"""

from __future__ import annotations

import re
from importlib import resources

import psycopg
import sqlalchemy as sa

DEFAULT_EMBEDDING_DIM = 384
#: The generated head schema (see :mod:`hrag_pg.schema_dump`): documentation and
#: a test oracle, never applied by a revision.
HEAD_SCHEMA_FILE = "schema.sql"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def read(name: str) -> str:
    """The text of one SQL file shipped in the package."""
    return resources.files("hrag_pg").joinpath("sql").joinpath(name).read_text(encoding="utf-8")


def names() -> list[str]:
    """The revisions' SQL files shipped in the package, sorted (not the generated head schema)."""
    folder = resources.files("hrag_pg").joinpath("sql")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql") and p.name != HEAD_SCHEMA_FILE)


def render(sql: str, params: dict[str, object]) -> str:
    """Fill ``{{name}}`` placeholders; an unknown placeholder is a programming error."""

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in params:
            raise KeyError(f"SQL placeholder {{{{{key}}}}} has no value")
        return str(params[key])

    return _PLACEHOLDER.sub(substitute, sql)


def validate_dim(value: object) -> int:
    try:
        dim = int(str(value))
    except ValueError:
        raise ValueError(f"embedding_dim must be an integer, got {value!r}") from None
    if not 1 <= dim <= 16000:
        raise ValueError(f"embedding_dim must be between 1 and 16000, got {dim}")
    return dim


def apply(conn: sa.Connection, name: str, *, embedding_dim: int | None = None) -> None:
    """Execute one SQL file on the migration's connection, inside its transaction.

    The file is sent through the raw driver so PL/pgSQL bodies (``%``, ``:=``)
    reach the server untouched.  The installation's recorded dimension wins
    over the requested one once ``hrag.config`` exists.
    """
    recorded = None
    if conn.exec_driver_sql("SELECT to_regclass('hrag.config') IS NOT NULL").scalar():
        recorded = conn.exec_driver_sql("SELECT embedding_dim FROM hrag.config").scalar()
    dim = recorded if recorded is not None else (embedding_dim or DEFAULT_EMBEDDING_DIM)
    sql = render(read(name), {"embedding_dim": validate_dim(dim)})
    driver_conn = conn.connection.driver_connection
    assert isinstance(driver_conn, psycopg.Connection)
    with driver_conn.cursor() as cur:
        cur.execute(sql)
