"""Faults from outside: a killed ingesting process, a server restart, timeouts and cancels.

Each test proves that what was stored before the fault is intact, that no
lock outlives the fault, and that the next call works.  Failures a user sees
are hrag's own one-sentence errors, not driver tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from pgvector.psycopg import register_vector
from pytest_postgresql.executors import NoopExecutor
from typer.testing import CliRunner

import hrag_pg.api as api_module
import hrag_pg.async_repository as async_repository
import hrag_pg.repository as repository_module
from hrag_pg import db, queries
from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.cli import app
from hrag_pg.errors import ConfigurationError, ConnectionLost, HragError, QueryCancelled
from hrag_pg.ingest.flatten import FlatDocument
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file, prepare_tree
from hrag_pg.queries import Search
from hrag_pg.repository import Repository
from tests.conftest import TEMPLATE_DB, ServerControl, create_database, drop_database, url_for
from tests.embedders import HashingEmbedder
from tests.integration.test_ingest_write import (
    assert_same,
    expected_text,
    handbook,
    root_id,
    snapshot,
)
from tests.reliability.support import advisory_locks, locks_of, source_lock_key, time_limit, wait_for

REPO = Path(__file__).resolve().parents[2]


def _own_repository(db_url: str, **connect_args: Any) -> Repository:
    """A Repository with an engine (pool) of its own, optionally with session settings."""
    engine = sa.create_engine(db.sqlalchemy_url(db_url), pool_pre_ping=True, connect_args=connect_args)
    sa.event.listen(engine, "connect", db._register_vector)
    return Repository(engine)


def prepare_tree_of(text: str, source: str, embedder: HashingEmbedder) -> FlatDocument:
    return prepare_tree(parse_markdown(text, source), IngestOptions(), model_name=embedder.model_name,
                        counter=embedder.token_counter)


def _hrag_check(db_url: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, ["check", "--json"], env={"HRAG_DATABASE_URL": db_url})
    return result.exit_code, json.loads(result.stdout)


# ------------------------------------------------------- 1. SIGKILL of the writer


def _read_line(proc: subprocess.Popen[str], prefix: str, timeout: float) -> str:
    """The first stdout line of ``proc`` starting with ``prefix`` (bounded wait)."""
    assert proc.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    try:
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(deadline - time.monotonic(), 0.01)):
                continue
            line = proc.stdout.readline()
            if not line:  # EOF: the child ended without printing it
                break
            seen.append(line)
            if line.startswith(prefix):
                return line
    finally:
        selector.close()
    stderr = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
    raise AssertionError(f"child never printed {prefix!r}; stdout {seen!r}; stderr {stderr[-2000:]}")


def test_sigkill_of_the_ingesting_process_half_way_keeps_the_previous_version_and_leaves_no_lock(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "big.md"
    path.write_text(handbook(3, 6), encoding="utf-8")
    assert hrag.ingest([path], stop_on_error=True).results[0].status == "created"
    before = snapshot(sql, path)

    # Version 2: 3,000 paragraphs, written by another process in COPY chunks of 100 rows.
    path.write_text(handbook(30, 100, tag="v2"), encoding="utf-8")
    probe = HashingEmbedder()
    new = prepare_file(path, IngestOptions(), model_name=probe.model_name, counter=probe.token_counter)
    assert len(new.nodes) > 3000
    app_name = f"hrag-kill-{uuid.uuid4().hex[:8]}"
    child_url = f"{db_url}&application_name={app_name}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.reliability.ingest_child", child_url, str(path), "100"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        half = _read_line(proc, "HALF", timeout=90).split()
        written, total = int(half[1]), int(half[2])
        assert total == len(new.nodes) and total // 2 <= written < total

        # At HALF the child's backend holds the source lock inside its open transaction.
        backends = {r[0] for r in sql.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            (app_name,),
        )}
        holders = advisory_locks(sql)
        assert len(holders) == 1 and holders[0][1] and holders[0][0] in backends
        writer_pid = holders[0][0]
        # ... and nothing of version 2 is visible to anyone else.
        assert_same(before, snapshot(sql, path))

        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()

    # The server notices the dead client: its backend ends and releases the lock.
    wait_for(lambda: not advisory_locks(sql) and not locks_of(sql, writer_pid), timeout=5,
             message="the killed writer's backend releasing its locks")
    wait_for(lambda: sql.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                 (writer_pid,)).fetchone()[0] == 0,
             timeout=5, message="the killed writer's backend exiting")

    assert_same(before, snapshot(sql, path))
    new_only = [n.id for n in new.nodes if n.id not in {r[0] for r in before["nodes"]}]
    assert new_only and sql.execute(
        "SELECT count(*) FROM hrag.nodes WHERE id = ANY(%s)", (new_only,)).fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%v2:%%'").fetchone()[0] == 0
    assert hrag.repository.check_integrity() == []
    code, report = _hrag_check(db_url)
    assert (code, report["ok"], report["problems"]) == (0, True, [])

    # A writer of the same source gets its lock at once.
    with psycopg.connect(db.libpq_url(db_url)) as writer:
        assert writer.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                              (source_lock_key(path.name),)).fetchone()[0] is True


# --------------------------------------------------------- 2. server restart


@pytest.fixture
def restartable(hrag_pg_proc: NoopExecutor,
                server_control: ServerControl | None) -> Iterator[tuple[str, ServerControl]]:
    """A fresh migrated database on the session's server, and the means to restart that server.

    The server restarted is the one under test in this pass (the embedded
    PostgreSQL 18, or the tests/pg_majors.py server of ``make test-pg16``).
    The test gets its own database, not the ``db_url`` fixture's, whose
    connections the restart breaks.
    """
    if server_control is None:
        pytest.skip("HRAG_TEST_DATABASE_URL names a server this harness did not start, so it cannot restart "
                    "it; for a tests/pg_majors.py server set HRAG_TEST_PG_MAJOR and HRAG_TEST_PG_DATADIR")
    name = f"hrag_restart_{uuid.uuid4().hex[:8]}"
    create_database(hrag_pg_proc, name, template=TEMPLATE_DB)
    try:
        yield url_for(hrag_pg_proc, name), server_control
    finally:
        db._engine_for.cache_clear()
        server_control.start()  # idempotent; brings the server back if the test failed while it was down
        drop_database(hrag_pg_proc, name)


def _server_major(url: str) -> int:
    with psycopg.connect(db.libpq_url(url)) as conn:
        return int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000


def _restarted_server_is_the_one_under_test(url: str, control: ServerControl) -> None:
    major = _server_major(url)
    print(f"restarting {control.description} (PostgreSQL {major})")
    expected = os.environ.get("HRAG_TEST_PG_MAJOR") if os.environ.get("HRAG_TEST_DATABASE_URL") else None
    if expected:
        assert major == int(expected), f"the server under test is PostgreSQL {major}, not {expected}"


def test_server_restart_fails_in_flight_reads_clearly_and_the_next_call_reconnects(
    restartable: tuple[str, ServerControl],
) -> None:
    """Reads during a restart of the server under test raise hrag errors; the first call after it succeeds.

    Recorded behaviour (before the fix these were raw driver errors:
    ``psycopg.OperationalError: consuming input failed: server closed the
    connection unexpectedly`` and ``sqlalchemy.exc.OperationalError: ...
    connection is bad: ... No such file or directory``):

    * a call in flight when the server stops → ConnectionLost ("... was lost
      during the call (terminating connection due to administrator command)");
    * a call while the server is down → ConfigurationError ("Cannot connect to
      PostgreSQL at ... check HRAG_DATABASE_URL ...");
    * the first call after the restart → results (pool_pre_ping drops the
      dead pooled connections).
    """
    url, control = restartable
    _restarted_server_is_the_one_under_test(url, control)
    hrag = HRAG(url, embedder=HashingEmbedder())
    try:
        hrag.ingest_tree(parse_markdown(handbook(3, 5), "restart.md"))
        question = "Rule 7: employees submit form F-007"
        expected = [r.node_id for r in hrag.parent_child(question)]
        assert expected

        outcomes: list[tuple[float, str, str]] = []
        stop = threading.Event()

        def query_loop() -> None:
            started = time.monotonic()
            while not stop.is_set() and time.monotonic() - started < 60:
                try:
                    hrag.parent_child(question)
                    outcomes.append((time.monotonic(), "ok", ""))
                except Exception as exc:  # noqa: BLE001 - recorded and asserted on below
                    outcomes.append((time.monotonic(), type(exc).__name__, str(exc)))
                    time.sleep(0.02)

        in_flight: list[BaseException | list[Any]] = []

        def blocked_call() -> None:
            try:
                in_flight.append(hrag.parent_child(question))
            except BaseException as exc:  # noqa: BLE001
                in_flight.append(exc)

        loop = threading.Thread(target=query_loop)
        loop.start()
        wait_for(lambda: sum(o[1] == "ok" for o in outcomes) >= 3, timeout=10, message="queries running")

        # Calls that are certainly in flight at the stop: they wait for a table lock.
        locker = psycopg.connect(db.libpq_url(url))
        locker.execute("LOCK TABLE hrag.nodes IN ACCESS EXCLUSIVE MODE")
        blocked = threading.Thread(target=blocked_call)
        blocked.start()
        with psycopg.connect(db.libpq_url(url), autocommit=True) as monitor:
            wait_for(lambda: monitor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database() AND query LIKE '%%hrag.parent_child%%'"
            ).fetchone()[0] == 2, timeout=10, message="two retrievals waiting for the lock")

        with time_limit(60, "stopping the server"):
            control.stop()
        stopped = time.monotonic()
        blocked.join(timeout=30)
        assert not blocked.is_alive()
        wait_for(lambda: any(o[0] > stopped and o[1] != "ok" for o in outcomes), timeout=10,
                 message="a call failing while the server is down")
        stop.set()
        loop.join(timeout=30)
        with contextlib.suppress(psycopg.Error):
            locker.close()

        with time_limit(120, "restarting the server"):
            control.start()
        # The very next call, on a pool full of connections to the old server, succeeds.
        assert [r.node_id for r in hrag.parent_child(question)] == expected
        assert hrag.node_text(root_id_of(url, "restart.md")) is not None

        [error] = in_flight
        print(f"in flight: {type(error).__name__}: {error}")
        assert isinstance(error, ConnectionLost), f"{type(error).__module__}.{type(error).__name__}: {error}"
        assert "was lost during the call" in str(error) and "Retry" in str(error)
        failures = {(name, message) for _, name, message in outcomes if name != "ok"}
        for name, message in sorted(failures):
            print(f"while restarting: {name}: {message}")
        assert failures
        for name, message in failures:
            assert name in {"ConnectionLost", "ConfigurationError", "QueryCancelled"}, f"{name}: {message}"
            assert "Background on this error" not in message and "[SQL:" not in message
        assert issubclass(ConfigurationError, HragError) and issubclass(ConnectionLost, HragError)
    finally:
        hrag.repository.engine.dispose()


def test_a_read_on_a_pooled_connection_while_the_server_is_down_says_the_server_cannot_be_reached(
    restartable: tuple[str, ServerControl],
) -> None:
    """The read goes out unpinged on a connection the stop killed, and its repeat cannot connect.

    The error is ConnectionLost and names both: the lost connection and why
    reconnecting failed (the same sentence a call that cannot connect gets).
    """
    url, control = restartable
    _restarted_server_is_the_one_under_test(url, control)
    hrag = HRAG(url, embedder=HashingEmbedder())
    try:
        hrag.ingest_tree(parse_markdown(handbook(3, 5), "down.md"))
        question = "Rule 7: employees submit form F-007"
        expected = [r.node_id for r in hrag.parent_child(question)]
        with time_limit(60, "stopping the server"):
            control.stop()
        with pytest.raises(ConnectionLost) as lost:
            hrag.parent_child(question)
        message = str(lost.value)
        assert "was lost during the call" in message and "Reconnecting failed as well" in message
        assert "Cannot connect to PostgreSQL" in message and "Background on this error" not in message
        # The collections' model records (read before a write, and by a reader every few seconds) as clearly.
        for call in (hrag.collection_models, lambda: hrag.ingest_text("# Down\n\nNothing.\n", source="down2.md")):
            with pytest.raises(ConfigurationError, match="Cannot connect to PostgreSQL"):
                call()
        with time_limit(120, "restarting the server"):
            control.start()
        assert [r.node_id for r in hrag.parent_child(question)] == expected
    finally:
        hrag.repository.engine.dispose()


async def test_an_async_read_while_the_server_is_down_fails_at_once_and_says_reconnecting_failed(
    restartable: tuple[str, ServerControl],
) -> None:
    """The async pool's connection died with the server: the one repeat waits RETRY_TIMEOUT, not CONNECT_TIMEOUT."""
    url, control = restartable
    _restarted_server_is_the_one_under_test(url, control)
    hrag = HRAG(url, embedder=HashingEmbedder())
    question = "Rule 7: employees submit form F-007"
    try:
        hrag.ingest_tree(parse_markdown(handbook(3, 5), "down-async.md"))
        async with AsyncHRAG(hrag) as ahrag:
            expected = [r.node_id for r in await ahrag.parent_child(question)]
            with time_limit(60, "stopping the server"):
                control.stop()
            started = time.monotonic()
            with pytest.raises(ConnectionLost) as lost:
                await ahrag.parent_child(question)
            assert time.monotonic() - started < async_repository.CONNECT_TIMEOUT
            assert "was lost during the call" in str(lost.value)
            assert "Reconnecting failed as well" in str(lost.value)
            with time_limit(120, "restarting the server"):
                control.start()
            assert [r.node_id for r in hrag.parent_child(question)] == expected
    finally:
        hrag.repository.engine.dispose()


def test_server_restart_during_an_ingest_fails_it_clearly_keeps_the_previous_version_and_the_next_ingest_works(
    restartable: tuple[str, ServerControl], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``hrag ingest`` in flight while the server under test restarts.

    The write is held inside its transaction after its first COPY chunk
    (holding the source lock, rows sent) while the server is stopped (fast
    shutdown terminates its backend).  Then: exactly one error, hrag's
    ConnectionLost sentence, for that file; an ingest while the server is down
    fails with ConfigurationError; after the restart the previous version is
    stored exactly, nothing of the new one, integrity is clean, no lock is
    left, and the next ingest writes the new version.
    """
    url, control = restartable
    _restarted_server_is_the_one_under_test(url, control)
    embedder = HashingEmbedder()
    hrag = HRAG(url, embedder=embedder)
    path = tmp_path / "handbook.md"
    path.write_text(handbook(3, 6), encoding="utf-8")
    assert hrag.ingest([path], stop_on_error=True).results[0].status == "created"
    with psycopg.connect(db.libpq_url(url)) as conn:
        register_vector(conn)
        before = snapshot(conn, path)
    path.write_text(handbook(6, 10, tag="v2"), encoding="utf-8")
    monkeypatch.setattr(repository_module, "COPY_CHUNK", 10)

    inside = threading.Event()
    go_on = threading.Event()
    outcome: list[Any] = []

    def hold_after_first_chunk(written: int) -> None:
        if not inside.is_set():
            inside.set()
            go_on.wait(timeout=60)

    write_document = Repository.write_document

    def write_held(self: Repository, doc: FlatDocument, *args: Any, **kwargs: Any) -> Any:
        return write_document(self, doc, *args, **{**kwargs, "after_chunk": hold_after_first_chunk})

    def ingest() -> None:
        try:
            outcome.append(hrag.ingest([path]))
        except BaseException as exc:  # noqa: BLE001 - asserted on below
            outcome.append(exc)

    try:
        with monkeypatch.context() as patched:
            patched.setattr(Repository, "write_document", write_held)
            writer = threading.Thread(target=ingest)
            writer.start()
            assert inside.wait(timeout=30), "the ingest never reached its first COPY chunk"
            with time_limit(60, "stopping the server"):
                control.stop()
            go_on.set()
            writer.join(timeout=30)
            assert not writer.is_alive()

        [report] = outcome
        assert not isinstance(report, BaseException), f"{type(report).__name__}: {report}"
        assert report.results == []
        [(failed_path, error)] = report.failed
        print(f"ingest during the restart: {error}")
        assert failed_path == str(path)
        assert error.startswith("The connection to PostgreSQL at ") and "was lost during the call" in error
        assert "[SQL:" not in error and "Background on this error" not in error

        with pytest.raises(ConfigurationError, match="Cannot connect to PostgreSQL"):
            HRAG(url, embedder=embedder)  # while the server is down
    finally:
        go_on.set()
        with time_limit(120, "restarting the server"):
            control.start()

    with psycopg.connect(db.libpq_url(url), autocommit=True) as conn:
        register_vector(conn)
        assert_same(before, snapshot(conn, path))
        assert conn.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%v2:%%'").fetchone()[0] == 0
        assert advisory_locks(conn) == []
    assert hrag.repository.check_integrity() == []
    again = hrag.ingest([path], stop_on_error=True)  # the same HRAG: its pool reconnects
    assert [r.status for r in again.results] == ["updated"] and again.failed == []
    with psycopg.connect(db.libpq_url(url)) as conn:
        assert hrag.node_text(root_id(conn, path)) == expected_text(
            prepare_file(path, IngestOptions(), model_name=embedder.model_name, counter=embedder.token_counter))
    hrag.repository.engine.dispose()


def root_id_of(url: str, source: str) -> uuid.UUID:
    with psycopg.connect(db.libpq_url(url)) as conn:
        return root_id(conn, source)


def _terminate_idle_backends(db_url: str) -> int:
    """Terminate every idle connection to the test database but this one (a pool's, say)."""
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as killer:
        killed = killer.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'").fetchone()
    assert killed is not None
    return killed[0]


@pytest.fixture
def pings(db_url: str, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every ping the pool of ``db_url`` sends (its dialect's do_ping, still run for real)."""
    sent: list[object] = []
    dialect = type(db.engine(db_url).dialect)
    real = dialect.do_ping

    def counting(self: sa.engine.default.DefaultDialect, dbapi_connection: Any) -> bool:
        sent.append(dbapi_connection)
        return real(self, dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counting)
    return sent


def test_a_retrieval_on_a_pooled_connection_is_one_round_trip_without_a_ping(
    db_url: str, pings: list[object]
) -> None:
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_tree(parse_markdown(handbook(3, 5), "ping.md"))
    hrag.parent_child("Rule 7: employees submit form F-007")
    pings.clear()
    for _ in range(3):
        assert hrag.parent_child("Rule 7: employees submit form F-007")
        assert hrag.retrieve("Rule 7: employees submit form F-007", max_tokens=500)
    assert pings == []


def test_a_retrieval_whose_pooled_connection_died_runs_again_on_a_new_one(
    db_url: str, pings: list[object]
) -> None:
    """The backends behind the pool are terminated while idle: the next read still answers.

    The read goes out unpinged, fails on the dead connection, and runs once
    more on a pinged checkout (which drops the pool's other dead connections).
    """
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_tree(parse_markdown(handbook(3, 5), "dead.md"))
    question = "Rule 7: employees submit form F-007"
    expected = [r.node_id for r in hrag.parent_child(question)]
    assert _terminate_idle_backends(db_url) >= 1
    pings.clear()
    assert [r.node_id for r in hrag.parent_child(question)] == expected
    assert len(pings) >= 1, "the repeat was pinged"
    pings.clear()
    assert [r.node_id for r in hrag.parent_child(question)] == expected
    assert pings == [], "and the calls after it are not"


def test_a_write_on_a_pooled_connection_that_died_is_pinged_and_reconnects(db_url: str) -> None:
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_tree(parse_markdown(handbook(3, 5), "first.md"))
    assert _terminate_idle_backends(db_url) >= 1
    result = hrag.ingest_tree(parse_markdown(handbook(2, 3), "second.md"))
    assert result.status == "created" and result.nodes > 0


# ------------------------------------------------- 3. statement timeout, cancel


def test_cancelled_retrieval_holds_no_lock_afterwards_and_a_writer_proceeds_at_once(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, embedder: HashingEmbedder
) -> None:
    """``conn.cancel()`` from another thread during a slow hrag.parent_child call.

    The call is made slow the way a migration would: another session holds an
    ACCESS EXCLUSIVE lock on hrag.nodes, so the retrieval waits inside its
    statement.  After the cancel the caller gets QueryCancelled (not a driver
    error), the pooled connection is idle with no lock granted or awaited,
    and once the blocker is gone a writer of the same source proceeds at once.
    """
    source = "cancel/handbook.md"
    hrag.ingest_tree(parse_markdown(handbook(3, 5), source))
    repo = _own_repository(db_url)
    drivers: list[psycopg.Connection] = []
    sa.event.listen(repo.engine, "checkout", lambda dbapi, _record, _proxy: drivers.append(dbapi))
    query = embedder.vector("Rule 7: employees submit form F-007")
    assert repo.fetch(*queries.plan_parent_child(Search(query), 20, 4, None))
    outcome: list[Any] = []

    def retrieve() -> None:
        try:
            outcome.append(repo.fetch(*queries.plan_parent_child(Search(query), 20, 4, None)))
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    with psycopg.connect(db.libpq_url(db_url)) as blocker:
        blocker.execute("LOCK TABLE hrag.nodes IN ACCESS EXCLUSIVE MODE")
        worker = threading.Thread(target=retrieve)
        worker.start()
        pid = wait_for(lambda: (sql.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
            "AND wait_event_type = 'Lock' AND query LIKE '%%hrag.parent_child%%'").fetchone() or [None])[0],
            timeout=10, message="hrag.parent_child waiting inside its statement")
        assert locks_of(sql, pid), "the waiting retrieval has a lock request"
        assert drivers[-1].info.backend_pid == pid
        drivers[-1].cancel_safe(timeout=5)
        worker.join(timeout=30)
        assert not worker.is_alive()

        [error] = outcome
        assert isinstance(error, QueryCancelled), f"{type(error).__module__}.{type(error).__name__}: {error}"
        assert "canceling statement due to user request" in str(error)
        # Back in the pool rolled back: idle, holding and awaiting nothing (the blocker still holds its lock).
        wait_for(lambda: sql.execute("SELECT state FROM pg_stat_activity WHERE pid = %s",
                                     (pid,)).fetchone()[0] == "idle", timeout=5, message="the backend idle")
        assert locks_of(sql, pid) == []
        assert advisory_locks(sql) == []
        blocker.rollback()

    # A writer of the same source proceeds at once (a 1 s lock_timeout would fail it otherwise).
    writer = _own_repository(db_url, options="-c lock_timeout=1000")
    doc = prepare_tree_of(handbook(3, 5, tag="after-cancel"), source, embedder)
    started = time.monotonic()
    assert writer.write_document(doc, embedder).status == "updated"
    assert time.monotonic() - started < 5
    assert writer.node_text(root_id(sql, source)) == expected_text(doc)

    # The cancelled repository's next call works on the same pool.
    assert repo.fetch(*queries.plan_parent_child(Search(query), 20, 4, None))
    repo.engine.dispose()
    writer.engine.dispose()


def test_statement_timeout_during_a_write_releases_the_source_lock(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, embedder: HashingEmbedder
) -> None:
    """A write cut off by ``statement_timeout`` while holding the source lock releases it.

    The write is blocked (a row lock on one of the document's nodes, held by
    another session) after it took the source's advisory lock; the server's
    ``statement_timeout`` cancels it and the writer gets hrag's QueryCancelled.
    """
    source = "timeout/handbook.md"
    hrag.ingest_tree(parse_markdown(handbook(2, 4), source))
    before = snapshot(sql, source)
    doc_id = before["document"][0]

    with psycopg.connect(db.libpq_url(db_url)) as blocker:
        blocker.execute("SELECT id FROM hrag.nodes WHERE document_id = %s ORDER BY seq LIMIT 1 FOR UPDATE",
                        (doc_id,))
        timed = _own_repository(db_url, options="-c statement_timeout=500")
        pids: list[int] = []
        sa.event.listen(timed.engine, "checkout", lambda dbapi, _r, _p: pids.append(dbapi.info.backend_pid))
        new = prepare_tree_of(handbook(2, 4, tag="v2"), source, embedder)
        with pytest.raises(QueryCancelled) as raised:
            timed.write_document(new, embedder)
        assert "statement timeout" in str(raised.value)

        # The blocker still holds its row lock, yet no advisory lock is left and the
        # timed-out writer's backend holds nothing.
        writer_pid = pids[-1]
        assert advisory_locks(sql) == []
        assert locks_of(sql, writer_pid) == []
        with psycopg.connect(db.libpq_url(db_url)) as other:
            assert other.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))",
                                 (source_lock_key(source),)).fetchone()[0] is True
        assert_same(before, snapshot(sql, source))
        blocker.rollback()

    # Without the blocker the same write goes through on the same engine.
    assert timed.write_document(new, embedder).status == "updated"
    assert timed.node_text(root_id(sql, source)) == expected_text(new)
    timed.engine.dispose()


def test_ctrl_c_during_a_blocked_write_is_an_interrupt_and_leaves_a_usable_pool(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, embedder: HashingEmbedder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Ctrl-C while a write waits on a row lock: KeyboardInterrupt, the previous version, no lock left."""
    source = "interrupt/handbook.md"
    hrag.ingest_tree(parse_markdown(handbook(2, 4), source))
    before = snapshot(sql, source)
    doc_id = before["document"][0]
    # A test run started in the background inherits SIGINT ignored: give it Python's default handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    repo = _own_repository(db_url)
    new = prepare_tree_of(handbook(2, 4, tag="v2"), source, embedder)
    try:
        with psycopg.connect(db.libpq_url(db_url)) as blocker:
            blocker.execute("SELECT id FROM hrag.nodes WHERE document_id = %s ORDER BY seq LIMIT 1 FOR UPDATE",
                            (doc_id,))
            timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
            timer.start()
            with caplog.at_level("ERROR", logger="sqlalchemy.pool"), pytest.raises(KeyboardInterrupt):
                repo.write_document(new, embedder)
            timer.join()
            blocker.rollback()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], "the pool logged a reset failure"
    assert_same(before, snapshot(sql, source))
    assert advisory_locks(sql) == []
    # The same pool writes the new version.
    assert repo.write_document(new, embedder).status == "updated"
    assert repo.node_text(root_id(sql, source)) == expected_text(new)
    repo.engine.dispose()


def test_ctrl_c_that_leaves_a_command_in_progress_stays_an_interrupt(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """An interrupt whose connection still has a command in progress is re-raised, not ConnectionLost.

    Then the transaction's rollback fails ("another command is already in
    progress").  Before the fix that rollback error replaced the interrupt:
    ``hrag ingest`` reported the file as failed, went on with the next one
    and exited 1 instead of 130, and the pool logged a traceback when it
    reset the connection (the fresh-clone CI run of
    ``test_ctrl_c_during_ingest_exits_130_with_one_line`` once caught Ctrl-C
    at that point).  The state is made here directly: a query sent and not
    read, then the interrupt.
    """
    repo = _own_repository(db_url)

    def interrupt_with_a_command_in_progress(call: Any) -> None:
        with call() as conn:
            repository_module._driver(conn).pgconn.send_query(b"SELECT pg_sleep(0.2)")
            raise KeyboardInterrupt

    for call in (repo._writing, repo._reading):
        with caplog.at_level("ERROR", logger="sqlalchemy.pool"), pytest.raises(KeyboardInterrupt):
            interrupt_with_a_command_in_progress(call)
        assert not [r for r in caplog.records if r.name.startswith("sqlalchemy")], \
            f"{call.__name__}: the pool logged a reset failure"
    assert repo.fetch("SELECT 1 AS one", {}) == [{"one": 1}]  # the same pool answers the next call
    repo.engine.dispose()


# ------------------------------------------- 4. connection lost during a write


def test_connection_lost_mid_copy_fails_that_file_clearly_and_the_batch_goes_on(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``hrag ingest a.md b.md c.md`` while b.md's writing backend is terminated mid-COPY.

    b.md is reported as failed with hrag's ConnectionLost sentence (no driver
    text such as "[SQL:" or "Background on this error"), its previous version
    is intact and nothing of its new version is stored; a.md and c.md are
    written; the exit status is 1.  Before the fix the batch stopped with
    ``psycopg.OperationalError: terminating connection due to administrator
    command``.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    paths = {name: docs / f"{name}.md" for name in ("a", "b", "c")}
    paths["b"].write_text(handbook(3, 6), encoding="utf-8")
    assert hrag.ingest([paths["b"]], stop_on_error=True).results[0].status == "created"
    before = snapshot(sql, paths["b"])
    for name, path in paths.items():
        path.write_text(handbook(4, 8, tag=f"new-{name}"), encoding="utf-8")

    monkeypatch.setattr(repository_module, "COPY_CHUNK", 5)
    killed: list[int] = []
    write_document = Repository.write_document

    def terminate_own_backend(written: int) -> None:
        """after_chunk of b.md's write: terminate the backend running the COPY, once."""
        if killed:
            return
        with psycopg.connect(db.libpq_url(db_url), autocommit=True) as killer:
            for (pid,) in killer.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND query LIKE 'COPY hrag.nodes%'"
            ).fetchall():
                assert killer.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]
                killed.append(pid)

    def write_with_fault(self: Repository, doc: FlatDocument, *args: Any, **kwargs: Any) -> Any:
        if doc.source.endswith("b.md"):
            kwargs["after_chunk"] = terminate_own_backend
        return write_document(self, doc, *args, **kwargs)

    monkeypatch.setattr(Repository, "write_document", write_with_fault)
    embedder = HashingEmbedder()
    monkeypatch.setattr(api_module, "embedder_for", lambda model=None: embedder)
    result = CliRunner().invoke(app, ["ingest", str(docs), "--json"], env={"HRAG_DATABASE_URL": db_url})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert len(killed) == 1, "exactly b.md's writing backend was terminated"
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert sorted(Path(r["source"]).name for r in report["results"]) == ["a.md", "c.md"]
    assert {r["status"] for r in report["results"]} == {"created"}
    [failed] = report["failed"]
    assert Path(failed["path"]).name == "b.md"
    assert "The connection to PostgreSQL" in failed["error"] and "was lost during the call" in failed["error"]
    # The first failure (the COPY's), not the rollback's "the connection is lost" that follows it.
    assert "server closed the connection" in failed["error"] or "terminating connection" in failed["error"]
    assert "[SQL:" not in failed["error"] and "Background on this error" not in failed["error"]

    assert_same(before, snapshot(sql, paths["b"]))
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE '%%new-b%%'").fetchone()[0] == 0
    for name in ("a", "c"):
        assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE content LIKE %s",
                           (f"%new-{name}:%",)).fetchone()[0] == 32
    assert hrag.repository.check_integrity() == []


def test_connection_lost_mid_copy_raises_connection_lost_from_the_python_api(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``write_document`` itself raises ConnectionLost (an HragError), and the next write works."""
    path = tmp_path / "handbook.md"
    path.write_text(handbook(3, 6), encoding="utf-8")
    hrag.ingest([path], stop_on_error=True)
    before = snapshot(sql, path)
    path.write_text(handbook(4, 8, tag="v2"), encoding="utf-8")
    probe = HashingEmbedder()
    new = prepare_file(path, IngestOptions(), model_name=probe.model_name, counter=probe.token_counter)
    monkeypatch.setattr(repository_module, "COPY_CHUNK", 5)

    def terminate(written: int) -> None:
        with psycopg.connect(db.libpq_url(db_url), autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND query LIKE 'COPY hrag.nodes%'")

    with pytest.raises(ConnectionLost, match=r"was lost during the call .*(server closed|terminating)"):
        hrag.repository.write_document(new, probe, after_chunk=terminate)
    assert_same(before, snapshot(sql, path))
    assert hrag.repository.write_document(new, probe).status == "updated"
    assert hrag.repository.node_text(root_id(sql, path)) == expected_text(new)
