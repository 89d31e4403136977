"""``sql/schema.sql``, the generated head schema, is current and equivalent to migrating.

The revisions stay the upgrade path; ``schema.sql`` is where a reader finds the
current definition of every table and function.  These tests keep the two
from drifting: the file is exactly what ``python -m hrag_pg.schema_dump``
makes of the session's template database (migrated to head), and applying it
to an empty database yields the same catalog as running the migrations.
"""

from __future__ import annotations

import difflib

import psycopg
import pytest
from pytest_postgresql.executors import NoopExecutor

from hrag_pg import schema_dump, schema_sql
from tests.conftest import TEMPLATE_DB, url_for
from tests.schema_snapshot import snapshot

REGENERATE = "python -m hrag_pg.schema_dump"


def _server_major_and_dim(url: str) -> tuple[int, int]:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        major = conn.execute("SELECT current_setting('server_version_num')::int / 10000").fetchone()
        dim = conn.execute("SELECT embedding_dim FROM hrag.config").fetchone()
    assert major is not None and dim is not None
    return major[0], dim[0]


def _skip_unless_default_dim(dim: int) -> None:
    if dim != schema_sql.DEFAULT_EMBEDDING_DIM:
        pytest.skip(f"the session's databases use embedding_dim {dim} (HRAG_EMBEDDING_DIM); "
                    f"schema.sql is rendered with {schema_sql.DEFAULT_EMBEDDING_DIM}")


def test_schema_sql_is_what_pg_dump_makes_of_a_database_migrated_to_head(hrag_pg_proc: NoopExecutor) -> None:
    template = url_for(hrag_pg_proc, TEMPLATE_DB, driver=False)
    major, dim = _server_major_and_dim(template)
    if major != schema_dump.PG_MAJOR:
        pytest.skip(f"the server is PostgreSQL {major}; schema.sql is PostgreSQL {schema_dump.PG_MAJOR}'s "
                    "pg_dump output, which differs by major")
    _skip_unless_default_dim(dim)
    try:
        pg_dump = schema_dump.pg_dump_path()
    except Exception as exc:  # noqa: BLE001 - any reason the embedded client is missing is a skip
        pytest.skip(f"no embedded pg_dump to compare with ({exc})")
    if schema_dump.pg_dump_major(pg_dump) != schema_dump.PG_MAJOR:
        pytest.skip(f"{pg_dump} is not PostgreSQL {schema_dump.PG_MAJOR}'s")

    regenerated = schema_dump.dump(template, pg_dump=pg_dump)
    committed = schema_sql.read(schema_sql.HEAD_SCHEMA_FILE)
    diff = "".join(list(difflib.unified_diff(
        committed.splitlines(keepends=True), regenerated.splitlines(keepends=True),
        "committed schema.sql", "database at head",
    ))[:60])
    assert regenerated == committed, f"hrag_pg/sql/schema.sql is stale: run `{REGENERATE}`\n{diff}"


def test_applying_schema_sql_to_an_empty_database_gives_the_catalog_of_migrating(
    blank_db_url: str, db_url: str
) -> None:
    _skip_unless_default_dim(_server_major_and_dim(db_url)[1])
    with psycopg.connect(blank_db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute(schema_sql.read(schema_sql.HEAD_SCHEMA_FILE))

    from_file, migrated = snapshot(blank_db_url), snapshot(db_url)
    differing = [key for key in migrated if from_file[key] != migrated[key]]
    assert differing == [], f"schema.sql and the migrations disagree on {differing}: run `{REGENERATE}`"
    assert from_file == migrated


def test_tidy_drops_session_noise_and_keeps_definitions_and_comments() -> None:
    raw = (
        "--\n-- PostgreSQL database dump\n--\n\n\\restrict abc123\n\n"
        "-- Dumped from database version 18.6\n-- Dumped by pg_dump version 18.6\n\n"
        "SET statement_timeout = 0;\nSELECT pg_catalog.set_config('search_path', '', false);\n\n"
        "--\n-- Name: hrag; Type: SCHEMA; Schema: -; Owner: -\n--\n\nCREATE SCHEMA hrag;\n\n\n"
        "--\n-- Name: f(); Type: FUNCTION; Schema: hrag; Owner: -\n--\n\n"
        "CREATE FUNCTION hrag.f() RETURNS int\n    LANGUAGE sql\n    AS $$ SELECT 1 $$;\n\n\n"
        "--\n-- Name: FUNCTION f(); Type: COMMENT; Schema: hrag; Owner: -\n--\n\n"
        "COMMENT ON FUNCTION hrag.f() IS 'one';\n\n\n"
        "--\n-- PostgreSQL database dump complete\n--\n\n\\unrestrict abc123\n\n"
    )
    text = schema_dump.tidy(raw)
    body = text.split("SET check_function_bodies = false;\n", 1)[1]
    assert body == (
        "\n-- SCHEMA: hrag\nCREATE SCHEMA hrag;\n\n"
        "-- FUNCTION: f()\nCREATE FUNCTION hrag.f() RETURNS int\n    LANGUAGE sql\n    AS $$ SELECT 1 $$;\n\n"
        "-- COMMENT: FUNCTION f()\nCOMMENT ON FUNCTION hrag.f() IS 'one';\n"
    )
    assert "restrict" not in text and "Dumped" not in text and "statement_timeout" not in text
