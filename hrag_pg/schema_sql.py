"""Reading and applying hrag's SQL: the topic files in ``sql/`` and the history in ``sql/revisions/``.

Every current function, table, policy and trigger is defined once, in a topic
file (``sql/budget.sql``, ``sql/merge.sql``, ...; :data:`TOPICS` in the order a
fresh install applies them).  ``sql/revisions/`` holds each revision's frozen
upgrade and downgrade files, which existing installations migrate through.
A revision applies a frozen file with :func:`apply`, or the live topic file it
changes with :func:`apply_topic` (docs/migrations.md).  Files are plain SQL
with ``{{name}}`` placeholders; the only placeholder today is
``{{embedding_dim}}``, fixed per installation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from importlib import resources

import psycopg
import sqlalchemy as sa

from .errors import SchemaError

DEFAULT_EMBEDDING_DIM = 384
REVISIONS = "revisions"
#: The topic files of functions (CREATE OR REPLACE, comments, grants on them):
#: a revision may apply them again on an installed schema.
FUNCTION_TOPICS = (
    "text.sql",  # before tables.sql: ...
    "lexical.sql",  # ... the generated lexical columns of hrag.nodes call these functions
    "common.sql",
    "vector_index.sql",
    "search.sql",
    "parent_child.sql",
    "merge.sql",
    "budget.sql",
    "integrity.sql",
    "tenancy.sql",
    "distribution.sql",
    "reembed.sql",
    "navigation.sql",
)
#: The topic files a fresh install applies, in dependency order.  tables.sql and
#: policies_triggers.sql create objects once (no revision applies them again).
TOPICS = (*FUNCTION_TOPICS[:2], "tables.sql", *FUNCTION_TOPICS[2:], "policies_triggers.sql")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


def read(name: str) -> str:
    """The text of one revision's frozen SQL file (``sql/revisions/``)."""
    return resources.files("hrag_pg").joinpath("sql").joinpath(REVISIONS).joinpath(name).read_text(encoding="utf-8")


def read_topic(name: str) -> str:
    """The text of one topic file (``sql/``): the current definitions."""
    return resources.files("hrag_pg").joinpath("sql").joinpath(name).read_text(encoding="utf-8")


def names() -> list[str]:
    """The revisions' frozen SQL files shipped in the package, sorted."""
    folder = resources.files("hrag_pg").joinpath("sql").joinpath(REVISIONS)
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))


def topic_names() -> list[str]:
    """The topic files shipped in the package, sorted."""
    folder = resources.files("hrag_pg").joinpath("sql")
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".sql"))


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
    """Execute one revision's frozen SQL file on the migration's connection, inside its transaction."""
    _execute(conn, read(name), embedding_dim)


def apply_topic(conn: sa.Connection, name: str) -> None:
    """Execute one function topic file again (the revision that changes that topic's functions)."""
    if name not in FUNCTION_TOPICS:
        raise ValueError(f"{name} is not a function topic file; tables and policies change by revision files")
    _execute(conn, read_topic(name), None)


def apply_steps(conn: sa.Connection, steps: Iterable[str]) -> None:
    """A revision's steps in order: a function topic file live, any other name a revision's frozen file
    (a revision's copy of a topic that a later revision changed)."""
    for step in steps:
        if step in FUNCTION_TOPICS:
            apply_topic(conn, step)
        else:
            apply(conn, step)


def install(conn: sa.Connection, *, embedding_dim: int | None = None) -> None:
    """Create the whole head schema from the topic files (a fresh install), in one transaction.

    Function bodies are checked when first called, not when created (as
    pg_dump restores do): the topic files are ordered by what their
    definitions need, not by what the bodies call.
    """
    previous = conn.exec_driver_sql("SELECT current_setting('check_function_bodies')").scalar()
    conn.exec_driver_sql("SELECT set_config('check_function_bodies', 'off', true)")
    for name in TOPICS:
        _execute(conn, read_topic(name), embedding_dim)
    check_function_bodies(conn)
    conn.exec_driver_sql("SELECT set_config('check_function_bodies', %s, true)", (previous,))


def check_function_bodies(conn: sa.Connection) -> None:
    """Check every SQL and PL/pgSQL body in schema ``hrag`` now that all they call exists.

    :func:`install` creates them unchecked; without this pass a syntax error
    in a topic file would install silently and fail only when something
    called that function.  The languages' own validators do the checking,
    which change nothing in the catalog (so nothing is propagated on Citus).
    """
    conn.exec_driver_sql("SELECT set_config('check_function_bodies', 'on', true)")
    functions = conn.exec_driver_sql(
        "SELECT p.oid, p.oid::regprocedure::text, l.lanvalidator::regproc::text "
        "  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
        " WHERE p.pronamespace = 'hrag'::regnamespace AND l.lanname IN ('sql', 'plpgsql') "
        " ORDER BY 2"
    ).all()
    broken = []
    for oid, signature, validator in functions:
        savepoint = conn.begin_nested()
        try:
            conn.exec_driver_sql(f"SELECT {validator}(%s)", (oid,))
        except sa.exc.DBAPIError as exc:
            savepoint.rollback()
            broken.append(f"{signature}: {str(exc.orig).splitlines()[0]}")
        else:
            savepoint.commit()
    if broken:
        raise SchemaError(f"the topic files' function bodies do not compile ({len(broken)}): " + "; ".join(broken))


def _execute(conn: sa.Connection, text: str, embedding_dim: int | None) -> None:
    """Send SQL through the raw driver so PL/pgSQL bodies (``%``, ``:=``) reach the server untouched.

    The installation's recorded dimension wins over the requested one once
    ``hrag.config`` exists.
    """
    recorded = None
    if conn.exec_driver_sql("SELECT to_regclass('hrag.config') IS NOT NULL").scalar():
        recorded = conn.exec_driver_sql("SELECT embedding_dim FROM hrag.config").scalar()
    dim = recorded if recorded is not None else (embedding_dim or DEFAULT_EMBEDDING_DIM)
    sql = render(text, {"embedding_dim": validate_dim(dim)})
    driver_conn = conn.connection.driver_connection
    assert isinstance(driver_conn, psycopg.Connection)
    with driver_conn.cursor() as cur:
        cur.execute(sql)
