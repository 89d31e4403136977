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


def _retrieval(url: str) -> list[object]:
    """Every retrieval function's rows for a few fixed query vectors (stored leaf embeddings)."""
    with psycopg.connect(_libpq(url)) as conn:
        leaves = conn.execute("SELECT embedding::text, content FROM hrag.nodes WHERE embedding IS NOT NULL "
                              "AND collection = 'default' ORDER BY document_id, seq LIMIT 3").fetchall()
        out: list[object] = []
        for vector, text in leaves:
            for sql in ("SELECT node_id, content, merged_from FROM hrag.auto_merge(%s::vector, 6, 0.5, 'default')",
                        "SELECT node_id, content FROM hrag.parent_child(%s::vector, 6, 2, 'default')"):
                out.append(conn.execute(sql, (vector,)).fetchall())
            out.append(conn.execute("SELECT node_id, content, reason FROM hrag.retrieve(%s::vector, %s, 400, "
                                    "'default') ORDER BY rank", (vector, text)).fetchall())
        return out


def test_upgrading_a_populated_install_to_head_keeps_every_row_and_the_same_answers(
    populated_previous_install: str,
) -> None:
    """Through every later revision (0010, 0011: retrieval as per-document steps) nothing stored changes,
    and the answers stay the same until revision 0029, which changes the budget mode's choice on
    purpose; parent-child and auto-merge in SQL keep theirs to head."""
    url = populated_previous_install
    migrate.upgrade(url, REVISION)
    before, answers = _contents(url), _retrieval(url)
    assert all(answers)

    migrate.upgrade(url, "0028")
    assert _contents(url) == before
    assert _retrieval(url) == answers

    migrate.upgrade(url)  # head
    assert _contents(url) == before
    at_head = _retrieval(url)
    assert all(at_head)
    for i in range(0, len(answers), 3):  # (auto-merge, parent-child, budget mode) per query vector
        assert at_head[i:i + 2] == answers[i:i + 2]
    with psycopg.connect(_libpq(url)) as conn:
        assert conn.execute("SELECT * FROM hrag.check_integrity()").fetchall() == []
