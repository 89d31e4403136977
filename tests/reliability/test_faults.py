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
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from hrag_pg import db, embedded, migrate
from hrag_pg.api import HRAG
from hrag_pg.cli import app
from hrag_pg.errors import ConfigurationError, ConnectionLost, HragError, QueryCancelled
from hrag_pg.ingest.flatten import FlatDocument
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file, prepare_tree
from hrag_pg.queries import Search
from hrag_pg.repository import Repository
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


def test_server_restart_fails_in_flight_calls_clearly_and_the_next_call_reconnects() -> None:
    """Calls during a restart raise hrag errors; the first call after it succeeds.

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

    The cluster lives outside pytest's basetemp: a pytest session starting
    elsewhere on the machine chmods /tmp/pytest-of-<user> to 0700, which
    locks the server's unprivileged OS user out of its data directory.
    """
    base = Path(tempfile.mkdtemp(prefix="hrag-restart-"))
    base.chmod(0o755)
    with time_limit(120, "starting a separate embedded cluster"):
        server = embedded.start(base)
    hrag: HRAG | None = None
    try:
        url = server.url()
        with time_limit(120, "migrating it"):
            migrate.upgrade(url)
        hrag = HRAG(url, embedder=HashingEmbedder())
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
                "AND query LIKE '%%hrag.parent_child%%'"
            ).fetchone()[0] == 2, timeout=10, message="two retrievals waiting for the lock")

        with time_limit(60, "stopping the cluster"):
            assert embedded.stop(base)
        stopped = time.monotonic()
        blocked.join(timeout=30)
        assert not blocked.is_alive()
        wait_for(lambda: any(o[0] > stopped and o[1] != "ok" for o in outcomes), timeout=10,
                 message="a call failing while the server is down")
        stop.set()
        loop.join(timeout=30)
        with contextlib.suppress(psycopg.Error):
            locker.close()

        with time_limit(120, "restarting the cluster"):
            embedded.start(base)
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
        if hrag is not None:
            hrag.repository.engine.dispose()
        db._engine_for.cache_clear()
        with time_limit(60, "stopping the cluster"):
            embedded.stop(base)
        shutil.rmtree(base, ignore_errors=True)


def root_id_of(url: str, source: str) -> uuid.UUID:
    with psycopg.connect(db.libpq_url(url)) as conn:
        return root_id(conn, source)


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
    assert repo.parent_child(Search(query), top_k_children=20)
    outcome: list[Any] = []

    def retrieve() -> None:
        try:
            outcome.append(repo.parent_child(Search(query), top_k_children=20))
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
    assert repo.parent_child(Search(query), top_k_children=20)
    repo.engine.dispose()
    writer.engine.dispose()


def test_statement_timeout_during_a_write_releases_the_source_lock(
    hrag: HRAG, sql: psycopg.Connection, db_url: str, embedder: HashingEmbedder
) -> None:
    """A write cut off by ``statement_timeout`` while holding the source lock releases it.

    The write is blocked (a row lock on one of the document's nodes, held by
    another session) after it took the source's advisory lock; the server's
    ``statement_timeout`` cancels it.  The write path still surfaces the
    driver's OperationalError (QueryCanceled): tests/integration/test_ingest_write.py
    pins that type for failures during a write.
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
        with pytest.raises((sa.exc.OperationalError, QueryCancelled)) as raised:
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
