"""The embedded default server: idempotent start, durable data, URLs for SQLAlchemy and psql."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import sqlalchemy as sa

from hrag_pg import embedded_server


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("own-cluster")
    yield base
    embedded_server.stop(base)


def test_status_of_a_fresh_data_dir_reports_not_initialised(tmp_path: Path) -> None:
    state = embedded_server.status(tmp_path / "nothing-here")
    assert (state.initialised, state.running) == (False, False)


def test_starting_twice_is_idempotent_and_keeps_one_server(cluster: Path) -> None:
    first = embedded_server.start(cluster)
    second = embedded_server.start(cluster)
    assert first.running and second.running
    assert first.pid == second.pid


def test_url_works_with_sqlalchemy_and_with_psql(cluster: Path) -> None:
    server = embedded_server.start(cluster)
    engine = sa.create_engine(server.url())
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT current_database()")).scalar() == embedded_server.DATABASE_NAME
    engine.dispose()
    psql = embedded_server.bin_dir() / "psql"
    out = subprocess.run(
        [str(psql), server.url(driver=False), "-At", "-c", "SELECT 40 + 2"],
        check=True, capture_output=True, text=True,
    )
    assert out.stdout.strip() == "42"


def test_stop_and_start_keeps_the_data(cluster: Path) -> None:
    server = embedded_server.start(cluster)
    engine = sa.create_engine(server.url(), poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS kept (v text)"))
        conn.execute(sa.text("INSERT INTO kept VALUES ('survives restarts')"))
    assert embedded_server.stop(cluster) is True
    assert embedded_server.status(cluster).running is False
    assert embedded_server.stop(cluster) is False
    restarted = embedded_server.start(cluster)
    engine = sa.create_engine(restarted.url(), poolclass=sa.pool.NullPool)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT v FROM kept")).scalar() == "survives restarts"


def test_a_stopped_server_has_no_url_and_says_how_to_start_it(cluster: Path) -> None:
    embedded_server.stop(cluster)
    with pytest.raises(Exception, match="hrag db start"):
        embedded_server.status(cluster).url()
    embedded_server.start(cluster)


def test_opening_a_fresh_database_migrates_it_and_the_first_vector_query_works(blank_db_url: str) -> None:
    """HRAG.open reads the schema version first (pooled connection, no vector type yet), then migrates."""
    from hrag_pg.api import HRAG
    from hrag_pg.queries import Search, plan_search
    from tests.embedders import HashingEmbedder

    hrag = HRAG.open(blank_db_url, embedder=HashingEmbedder())
    result = hrag.ingest_text("# Guide\n\nThe answer is forty-two.\n", source="guide.md")
    assert result.status == "created"
    hits = hrag.repository.fetch(*plan_search(Search(query=hrag.embed_query("What is the answer?")), 1))
    assert len(hits) == 1
