"""Bulk loads: the HNSW index is dropped for the load and rebuilt once, even after a failure."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from hrag_pg.api import HRAG
from hrag_pg.errors import IngestError
from hrag_pg.queries import Search
from tests.embedders import HashingEmbedder


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
    hits = hrag.repository.search(Search(
        query=HashingEmbedder().vector("Alpha paragraph 3 about ships."), collection="bulk"), 3)
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
