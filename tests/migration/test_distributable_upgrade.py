"""Revision 0009 (distributable keys) upgrades an install that holds documents, and reverts, keeping them all."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from alembic.script import ScriptDirectory

from hrag_pg import db, migrate
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file
from hrag_pg.models import IngestResult
from hrag_pg.repository import Repository
from tests.embedders import HashingEmbedder

REVISION = "0009"
EXAMPLES = Path(migrate.MIGRATIONS_DIR).parent / "examples"


def _previous() -> str:
    """The revision 0009 upgrades from (whatever the chain says at merge time)."""
    script = ScriptDirectory.from_config(migrate._script_config())
    down = script.get_revision(REVISION).down_revision
    assert isinstance(down, str)
    return down


def _ingest(url: str, collection: str, *, force: bool = False) -> list[IngestResult]:
    """Write the bundled examples at whatever revision the database is (the facade insists on head)."""
    embedder = HashingEmbedder()
    repository = Repository(db.engine(url))
    return [
        repository.write_document(
            prepare_file(path, IngestOptions(), collection=collection, model_name=embedder.model_name,
                         counter=embedder.token_counter),
            embedder, force=force)
        for path in sorted(EXAMPLES.iterdir())
    ]


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _contents(url: str) -> dict[str, object]:
    """Every document and node row (minus timestamps) and every node's full text."""
    with psycopg.connect(_libpq(url)) as conn:
        return {
            "documents": conn.execute(
                "SELECT id, collection, source, title, content_hash, metadata FROM hrag.documents ORDER BY id"
            ).fetchall(),
            "nodes": conn.execute(
                "SELECT id, document_id, parent_id, depth, seq, subtree_end, child_count, content, "
                "embedding::text FROM hrag.nodes ORDER BY document_id, seq"
            ).fetchall(),
            "texts": conn.execute("SELECT id, hrag.node_text(id) FROM hrag.nodes ORDER BY id").fetchall(),
        }


def _primary_key(url: str) -> str:
    with psycopg.connect(_libpq(url)) as conn:
        row = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                           "WHERE conrelid = 'hrag.nodes'::regclass AND contype = 'p'").fetchone()
    assert row is not None
    return str(row[0])


@pytest.fixture
def populated_previous_install(blank_db_url: str) -> str:
    """A database at the revision before 0009 holding the bundled examples in two collections."""
    migrate.upgrade(blank_db_url, _previous())
    for collection in ("default", "tenant_b"):
        assert [r.status for r in _ingest(blank_db_url, collection)] == ["created"] * 3
    return blank_db_url


def test_upgrading_an_install_with_documents_keeps_every_document_and_node(populated_previous_install: str) -> None:
    url = populated_previous_install
    before = _contents(url)
    assert len(before["documents"]) == 6  # type: ignore[arg-type]

    migrate.upgrade(url, REVISION)

    assert _primary_key(url) == "PRIMARY KEY (document_id, id)"
    assert _contents(url) == before
    with psycopg.connect(_libpq(url)) as conn:
        assert conn.execute("SELECT * FROM hrag.check_integrity()").fetchall() == []


def test_downgrading_0009_keeps_every_document_and_restores_the_single_column_key(
    populated_previous_install: str,
) -> None:
    url = populated_previous_install
    before = _contents(url)
    migrate.upgrade(url, REVISION)
    migrate.downgrade(url, _previous())
    assert _primary_key(url) == "PRIMARY KEY (id)"
    assert _contents(url) == before


def test_after_the_upgrade_re_ingesting_updates_documents_in_place(populated_previous_install: str) -> None:
    url = populated_previous_install
    migrate.upgrade(url, REVISION)
    assert {r.status for r in _ingest(url, "default", force=True)} == {"updated"}
    with psycopg.connect(_libpq(url)) as conn:
        assert conn.execute("SELECT count(*) FROM hrag.documents").fetchone() == (6,)
