"""Revision 0025 (collection models) upgrades an install that holds documents, and reverts, keeping them all.

Collections written before 0025 have no recorded model: the first write
records the model it uses (the one the old code used too), questions to them
keep working meanwhile, and a downgrade drops the records and the reembed
tables without touching a document.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from hrag_pg import db, migrate
from hrag_pg.api import HRAG
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file
from hrag_pg.repository import Repository
from tests.embedders import HashingEmbedder, SaltedHashingEmbedder

PREVIOUS, REVISION = "0024", "0025"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def _rows(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(_libpq(url)) as conn:
        return conn.execute("SELECT id, document_id, content_hash, embedding::text, token_count FROM hrag.nodes "
                            "ORDER BY document_id, seq").fetchall()


@pytest.fixture
def populated_0024(blank_db_url: str) -> str:
    migrate.upgrade(blank_db_url, PREVIOUS)
    embedder = HashingEmbedder()
    for path in (FIXTURES / "guide.md", FIXTURES / "work_rules_ja.md"):
        Repository(db.engine(blank_db_url)).write_document(
            prepare_file(path, IngestOptions(), collection="old", model_name=embedder.model_name,
                         counter=embedder.token_counter),
            embedder)
    return blank_db_url


def test_an_install_with_documents_upgrades_then_records_its_model_on_the_first_write_and_reverts(
        populated_0024: str) -> None:
    before = _rows(populated_0024)
    migrate.upgrade(populated_0024, REVISION)
    assert _rows(populated_0024) == before
    migrate.upgrade(populated_0024)  # (the Python layer needs the head revision; the later ones add functions)
    hrag = HRAG(populated_0024, embedder=HashingEmbedder())
    assert hrag.collection_models() == {}
    assert hrag.parent_child("試用期間", collection="old"), "an unrecorded collection still answers"

    hrag.ingest([FIXTURES / "security_policy_ja.md"], collection="old")
    assert hrag.collection_models()["old"].name == "hashing-test"
    with pytest.raises(Exception, match="hashing-salted"):
        HRAG(populated_0024, embedder=SaltedHashingEmbedder()).ingest_text("# X\n\nY.", source="x.md",
                                                                           collection="old")
    hrag.reembed("old", SaltedHashingEmbedder())
    switched = _rows(populated_0024)

    migrate.upgrade(populated_0024)  # (at head: nothing to do)
    hrag.repository.engine.dispose()
    db._engine_for.cache_clear()
    migrate.downgrade(populated_0024, PREVIOUS)
    assert _rows(populated_0024) == switched, "the downgrade keeps every document, node and vector"
    with psycopg.connect(_libpq(populated_0024)) as conn:
        assert conn.execute("SELECT to_regclass('hrag.collection_models'), to_regclass('hrag.reembed_nodes')"
                            ).fetchone() == (None, None)
    migrate.upgrade(populated_0024, REVISION)
    assert _rows(populated_0024) == switched
