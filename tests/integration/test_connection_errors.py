"""Bad configuration produces one sentence naming the problem and the fix."""

from __future__ import annotations

import psycopg
import pytest

from hrag_pg import db, migrate
from hrag_pg.errors import ConfigurationError, SchemaError


def test_a_non_postgres_url_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="Not a PostgreSQL URL"):
        db.sqlalchemy_url("mysql://u@h/db")


def test_an_unreachable_server_names_the_url_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRAG_DATABASE_URL", "postgresql://hrag:secret@127.0.0.1:1/nowhere")
    with pytest.raises(ConfigurationError) as info:
        db.check_reachable(db.resolve_url())
    message = str(info.value)
    assert "127.0.0.1:1/nowhere" in message and "HRAG_DATABASE_URL" in message
    assert "secret" not in message


def test_migrating_an_unreachable_server_is_one_clear_sentence() -> None:
    with pytest.raises(ConfigurationError, match="Cannot connect to PostgreSQL"):
        migrate.upgrade("postgresql://hrag@127.0.0.1:1/nowhere")


def test_a_user_without_create_privilege_is_told_what_to_grant(blank_db_url: str) -> None:
    libpq = blank_db_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(libpq, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS hrag_no_create")
        conn.execute("CREATE ROLE hrag_no_create LOGIN")
        conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    weak = blank_db_url.replace("postgres@", "hrag_no_create@", 1)
    try:
        with pytest.raises(ConfigurationError, match="lacks a privilege hrag needs"):
            migrate.upgrade(weak)
    finally:
        with psycopg.connect(libpq, autocommit=True) as conn:
            conn.execute("DROP OWNED BY hrag_no_create")
            conn.execute("DROP ROLE hrag_no_create")


def test_an_unmigrated_database_says_to_run_migrate(blank_db_url: str) -> None:
    with db.engine(blank_db_url).connect() as conn, pytest.raises(SchemaError, match="hrag migrate"):
        db.installed_embedding_dim(conn)
