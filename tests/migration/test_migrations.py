"""Migrations: reversible, isolated from the user's objects, honouring the dimension."""

from __future__ import annotations

import ast
from pathlib import Path

import psycopg
import pytest

from hrag_pg import migrate, schema_sql
from tests.schema_snapshot import snapshot

VERSIONS = Path(migrate.MIGRATIONS_DIR) / "versions"


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def test_upgrade_downgrade_upgrade_round_trip_leaves_an_identical_schema(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url)
    first = snapshot(blank_db_url)
    migrate.downgrade(blank_db_url, "base")
    migrate.upgrade(blank_db_url)
    assert snapshot(blank_db_url) == first


def test_downgrade_base_removes_everything_hrag_created(blank_db_url: str) -> None:
    before = snapshot(blank_db_url)
    migrate.upgrade(blank_db_url)
    assert snapshot(blank_db_url) != before
    migrate.downgrade(blank_db_url, "base")
    assert snapshot(blank_db_url) == before


def test_upgrade_at_head_is_idempotent(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url)
    first = snapshot(blank_db_url)
    migrate.upgrade(blank_db_url)
    assert snapshot(blank_db_url) == first


def test_existing_user_tables_and_their_alembic_history_are_untouched(blank_db_url: str) -> None:
    with psycopg.connect(_libpq(blank_db_url), autocommit=True) as conn:
        conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
        conn.execute("INSERT INTO public.alembic_version VALUES ('their_rev_42')")
        conn.execute("CREATE TABLE public.orders (id serial PRIMARY KEY, note text)")
        conn.execute("INSERT INTO public.orders (note) VALUES ('keep me')")
    before = snapshot(blank_db_url)

    migrate.upgrade(blank_db_url)
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT version_num FROM public.alembic_version").fetchall() == [("their_rev_42",)]
        assert conn.execute("SELECT version_num FROM hrag.alembic_version").fetchall() == [
            (migrate.head_revision(),)
        ]
        assert conn.execute("SELECT note FROM public.orders").fetchall() == [("keep me",)]

    migrate.downgrade(blank_db_url, "base")
    assert snapshot(blank_db_url) == before


def test_a_vector_extension_that_existed_before_survives_downgrade(blank_db_url: str) -> None:
    with psycopg.connect(_libpq(blank_db_url), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        conn.execute("CREATE TABLE public.mine (v vector(3))")
    migrate.upgrade(blank_db_url)
    migrate.downgrade(blank_db_url, "base")
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone() == (1,)
        assert conn.execute("SELECT to_regclass('public.mine') IS NOT NULL").fetchone() == (True,)


def test_embedding_dimension_is_chosen_at_migration_time_and_recorded(blank_db_url: str) -> None:
    migrate.upgrade(blank_db_url, embedding_dim=8)
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT embedding_dim FROM hrag.config").fetchone() == (8,)
        column_type = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'hrag.nodes'::regclass AND attname = 'embedding'"
        ).fetchone()
        assert column_type == ("vector(8)",)


def test_embedding_dimension_from_environment(blank_db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRAG_EMBEDDING_DIM", "16")
    migrate.upgrade(blank_db_url)
    with psycopg.connect(_libpq(blank_db_url)) as conn:
        assert conn.execute("SELECT embedding_dim FROM hrag.config").fetchone() == (16,)


def test_invalid_embedding_dimension_is_refused_by_name(blank_db_url: str) -> None:
    with pytest.raises(ValueError, match="embedding_dim must be"):
        migrate.upgrade(blank_db_url, embedding_dim=0)


def _sql_files_named_in(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".sql")
    ]


def test_every_revision_file_is_applied_by_exactly_one_revision() -> None:
    uses: dict[str, int] = {}
    for revision in sorted(VERSIONS.glob("*.py")):
        for name in _sql_files_named_in(revision):
            if name not in schema_sql.topic_names():
                uses[name] = uses.get(name, 0) + 1
    assert sorted(uses) == schema_sql.names(), "files in sql/revisions/ without a revision, or naming missing files"
    assert {name for name, count in uses.items() if count != 1} == set()


def test_no_two_revisions_apply_the_same_topic_file_live() -> None:
    """docs/migrations.md: when a revision changes a topic, the earlier revision's copy is frozen into revisions/."""
    live: dict[str, list[str]] = {}
    for revision in sorted(VERSIONS.glob("*.py")):
        for name in set(_sql_files_named_in(revision)) & set(schema_sql.topic_names()):
            live.setdefault(name, []).append(revision.name)
    assert {name: files for name, files in live.items() if len(files) > 1} == {}
    assert set(live) <= set(schema_sql.FUNCTION_TOPICS), "tables and policies change by ALTER in a revision file"


def test_every_function_says_what_it_is_for_and_internal_helpers_say_so(db_url: str) -> None:
    with psycopg.connect(_libpq(db_url)) as conn:
        rows = conn.execute(
            "SELECT p.proname, obj_description(p.oid, 'pg_proc') FROM pg_proc p "
            "WHERE p.pronamespace = 'hrag'::regnamespace ORDER BY 1").fetchall()
    assert rows
    missing = [name for name, comment in rows if not comment]
    assert missing == [], "functions without COMMENT ON FUNCTION"
    wrongly_marked = [name for name, comment in rows if name.startswith("_") != comment.startswith("internal:")]
    assert wrongly_marked == [], "internal helpers (named _*) must be commented 'internal: ...', and only they"


def test_the_head_revision_read_without_alembic_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    assert migrate.head_revision() == ScriptDirectory.from_config(migrate._script_config()).get_current_head()
    assert migrate.head_revision() == migrate.revisions()[-1]
