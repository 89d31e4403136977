"""The pool hands out a connection used moments ago without a ping, and pings one idle past the window."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from hrag_pg import db


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """An engine built as hrag builds them, not shared with other tests (db.engine caches per URL)."""
    built = db._engine_for.__wrapped__(db.sqlalchemy_url(db_url))
    yield built
    built.dispose()


def backend_pid(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def test_a_connection_returned_moments_ago_is_handed_out_without_a_ping(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pings: list[object] = []
    real_ping = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda conn: pings.append(conn) or real_ping(conn))
    first = backend_pid(engine)
    assert [backend_pid(engine) for _ in range(5)] == [first] * 5
    assert pings == [], "back-to-back calls cost no extra round trip"

    time.sleep(db.ALIVE_BYPASS_SECONDS + 0.2)
    assert backend_pid(engine) == first
    assert len(pings) == 1, "a connection idle past the window is pinged once"


def test_a_connection_the_server_dropped_while_idle_is_replaced_before_the_call(engine: Engine, db_url: str) -> None:
    dropped = backend_pid(engine)
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (dropped,)).fetchone() == (True,)
    time.sleep(db.ALIVE_BYPASS_SECONDS + 0.2)
    assert backend_pid(engine) != dropped, "the call ran on a new connection, no error"
