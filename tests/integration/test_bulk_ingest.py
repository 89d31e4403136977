"""Bulk loads: the HNSW index is dropped for the load and rebuilt once, even after a failure."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from hrag_pg.api import HRAG
from hrag_pg.errors import IngestError
from hrag_pg.queries import Search, plan_search
from tests.embedders import HashingEmbedder

REPO = Path(__file__).resolve().parents[2]

#: A bulk ingest in its own process that says LOADING once its first document is written, then waits to be killed.
BULK_THEN_WAIT = """
import sys, time
from hrag_pg.api import HRAG
from tests.embedders import HashingEmbedder

def on_file(path, index, total):
    if index == 2:
        print("LOADING", flush=True)
        time.sleep(120)
        raise SystemExit("nobody killed me")

HRAG(sys.argv[1], embedder=HashingEmbedder()).ingest([sys.argv[2]], collection="bulk", bulk=True, on_file=on_file)
"""


def _index_definition(conn: psycopg.Connection) -> str | None:
    row = conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'hrag' AND indexname = 'nodes_embedding_hnsw_idx'"
    ).fetchone()
    return row[0] if row else None


def _docs(tmp_path: Path, n: int) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(n):
        (folder / f"doc{i}.md").write_text(
            f"# Doc {i}\n\n## Part A\n\nAlpha paragraph {i} about ships.\n\n## Part B\n\nBeta paragraph {i}.\n",
            encoding="utf-8",
        )
    return folder


def test_bulk_ingest_rebuilds_the_same_vector_index(postgresql: psycopg.Connection, db_url: str,
                                                   tmp_path: Path) -> None:
    before = _index_definition(postgresql)
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    report = hrag.ingest([_docs(tmp_path, 5)], collection="bulk", bulk=True)
    assert len(report.results) == 5 and not report.failed
    assert _index_definition(postgresql) == before
    hits = hrag.repository.fetch(*plan_search(Search(
        query=HashingEmbedder().vector("Alpha paragraph 3 about ships."), collection="bulk"), 3))
    assert len(hits) == 3


def test_a_failing_bulk_ingest_still_rebuilds_the_index(postgresql: psycopg.Connection, db_url: str,
                                                       tmp_path: Path) -> None:
    before = _index_definition(postgresql)
    folder = _docs(tmp_path, 2)
    (folder / "broken.md").write_bytes(b"# Broken\n\nbad \xff byte\n")
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    with pytest.raises(IngestError, match=r"broken\.md"):
        hrag.ingest([folder], collection="bulk", bulk=True, stop_on_error=True)
    assert _index_definition(postgresql) == before


def _kill_a_bulk_ingest_mid_load(db_url: str, folder: Path) -> None:
    """Start a bulk ingest of ``folder`` in another process and SIGKILL it after its first document."""
    proc = subprocess.Popen([sys.executable, "-c", BULK_THEN_WAIT, db_url, str(folder)], cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            ready = selector.select(timeout=120)
        line = proc.stdout.readline() if ready else ""
        assert line == "LOADING\n", (line, proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_a_bulk_ingest_after_one_killed_mid_load_rebuilds_the_missing_index_and_goes_on(
        postgresql: psycopg.Connection, db_url: str, tmp_path: Path) -> None:
    before = _index_definition(postgresql)
    folder = _docs(tmp_path, 3)
    _kill_a_bulk_ingest_mid_load(db_url, folder)
    assert _index_definition(postgresql) is None  # what the killed load leaves: no vector index
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    assert [p["problem"] for p in hrag.repository.check_integrity()] == ["vector_index_missing"]

    report = hrag.ingest([folder], collection="bulk", bulk=True)
    assert not report.failed
    assert sorted(r.status for r in report.results) == ["created", "created", "unchanged"]
    assert _index_definition(postgresql) == before
    assert hrag.repository.check_integrity() == []
