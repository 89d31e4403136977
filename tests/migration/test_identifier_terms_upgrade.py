"""Revision 0023 (identifier terms) recomputes the stored terms and their statistics of an install with documents.

The stored terms are generated columns: PostgreSQL does not recompute them
when hrag.lexical_terms changes, so the revision must rebuild them, and the
per-document and per-collection term counts with them, both ways.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from hrag_pg import db, migrate
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file
from hrag_pg.repository import Repository
from tests.embedders import HashingEmbedder

REVISION = "0023"
PREVIOUS = "0022"
GUIDE = """# Timeouts

Call wait_for(fut, timeout) to bound how long a coroutine may run.

## Errors

A stream that ends early fails with ERR_STREAM_PREMATURE_CLOSE.
"""
# document_terms against the terms the nodes store now (the oracle), and the
# collections' rows against document_terms
STALE_TERM_COUNTS = """
SELECT coalesce(t.document_id, f.document_id), coalesce(t.term, f.term), t.leaves, f.leaves
  FROM hrag.document_terms t
  FULL JOIN (SELECT n.document_id, term, count(*)::integer AS leaves
               FROM hrag.nodes n, unnest(n.lexical_terms) AS term
              GROUP BY 1, 2) AS f ON f.document_id = t.document_id AND f.term = t.term
 WHERE t.leaves IS DISTINCT FROM f.leaves
"""


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


@pytest.fixture
def populated_0022(blank_db_url: str, tmp_path: Path) -> str:
    """A database at 0022 holding one guide that names two underscore identifiers."""
    migrate.upgrade(blank_db_url, PREVIOUS)
    path = tmp_path / "guide.md"
    path.write_text(GUIDE, encoding="utf-8")
    embedder = HashingEmbedder()
    Repository(db.engine(blank_db_url)).write_document(
        prepare_file(path, IngestOptions(), collection="guides", model_name=embedder.model_name,
                     counter=embedder.token_counter),
        embedder)
    return blank_db_url


def _identifier_state(url: str) -> tuple[bool, int | None, list[tuple[object, ...]], int]:
    """Whether a leaf stores wait_for; its count in the collection; stale counts; problems check_integrity sees."""
    with psycopg.connect(_libpq(url)) as conn:
        stored = conn.execute("SELECT bool_or('wait_for' = ANY (lexical_terms)) AND bool_or("
                              "hrag.term_hash('wait_for') = ANY (lexical_hashes)) FROM hrag.nodes").fetchone()
        counted = conn.execute("SELECT sum(leaves) FROM hrag.collection_terms WHERE term = 'wait_for'").fetchone()
        stale = conn.execute(STALE_TERM_COUNTS).fetchall()
        problems = conn.execute("SELECT count(*) FROM hrag.check_integrity()").fetchone()
    assert stored is not None and counted is not None and problems is not None
    return bool(stored[0]), counted[0], stale, problems[0]


def test_the_upgrade_stores_identifier_terms_of_existing_leaves_and_counts_them(populated_0022: str) -> None:
    assert _identifier_state(populated_0022) == (False, None, [], 0)

    migrate.upgrade(populated_0022, REVISION)

    assert _identifier_state(populated_0022) == (True, 1, [], 0)
    with psycopg.connect(_libpq(populated_0022)) as conn:
        assert conn.execute("SELECT count(*) FROM hrag.nodes n WHERE n.lexical_terms IS DISTINCT FROM "
                            "CASE WHEN n.embedding IS NOT NULL THEN hrag.node_lexical_terms("
                            "n.heading_path, n.content, n.metadata) END").fetchone() == (0,)
        assert "err_stream_premature_close" in conn.execute(
            "SELECT array_agg(term) FROM hrag.collection_terms WHERE collection = 'guides'").fetchone()[0]


def test_the_downgrade_takes_the_identifier_terms_and_their_counts_away_again(populated_0022: str) -> None:
    migrate.upgrade(populated_0022, REVISION)
    migrate.downgrade(populated_0022, PREVIOUS)

    assert _identifier_state(populated_0022) == (False, None, [], 0)
    with psycopg.connect(_libpq(populated_0022)) as conn:
        index = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'nodes_lexical_hashes_idx'").fetchone()
    assert index is not None and "gin (lexical_hashes)" in index[0]
