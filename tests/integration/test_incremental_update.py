"""Re-ingesting an edited document rewrites only what changed.

Editing a paragraph keeps the tree's shape, so only that row is updated in
place: every other row (and its HNSW index entry) is left alone, which is
what makes a one-paragraph edit cheap.  A structural edit (a paragraph
added) replaces the tree instead, still atomically.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from hrag_pg.api import HRAG
from tests.embedders import HashingEmbedder


def _doc(paragraphs: list[str]) -> str:
    body = "\n\n".join(paragraphs)
    return f"# Handbook\n\n## Rules\n\n{body}\n"


@pytest.fixture
def paragraphs() -> list[str]:
    return [f"Rule {i}: visitors sign the register at gate {i % 7} before entering." for i in range(50)]


def _row_versions(conn: psycopg.Connection) -> dict[str, str]:
    return {str(r[0]): r[1] for r in conn.execute("SELECT id, xmin::text FROM hrag.nodes")}


def test_editing_one_paragraph_updates_only_its_row(postgresql: psycopg.Connection, db_url: str,
                                                    tmp_path: Path, paragraphs: list[str]) -> None:
    path = tmp_path / "handbook.md"
    path.write_text(_doc(paragraphs), encoding="utf-8")
    embedder = HashingEmbedder()
    hrag = HRAG(db_url, embedder=embedder)
    hrag.ingest([path])
    postgresql.commit()
    before = _row_versions(postgresql)

    paragraphs[17] = "Rule 17: visitors with badges skip the register."
    path.write_text(_doc(paragraphs), encoding="utf-8")
    result = hrag.ingest([path]).results[0]
    postgresql.commit()
    after = _row_versions(postgresql)

    assert result.status == "updated" and result.embedded == 1
    assert set(after) == set(before), "same node ids: nothing deleted or inserted"
    rewritten = {node for node in after if after[node] != before[node]}
    leaf = postgresql.execute("SELECT id FROM hrag.nodes WHERE content = %s", (paragraphs[17],)).fetchone()[0]
    ancestors = {row[0] for row in postgresql.execute(
        "SELECT a.id FROM hrag.nodes a JOIN hrag.nodes l ON l.id = %s "
        "WHERE a.document_id = l.document_id AND l.seq BETWEEN a.seq AND a.subtree_end AND a.id <> l.id",
        (leaf,))}
    assert str(leaf) in rewritten or leaf in rewritten
    # Besides the edited leaf, only its ancestors' stored token totals (the budget's unit) change:
    # rows without embeddings, so nothing else is re-embedded or re-indexed in HNSW.
    assert {str(n) for n in rewritten} <= {str(leaf)} | {str(a) for a in ancestors}
    assert postgresql.execute("SELECT count(*) FROM hrag.nodes WHERE id::text = ANY(%s) AND embedding IS NOT NULL",
                              ([str(n) for n in rewritten],)).fetchone()[0] == 1


def test_editing_a_description_re_embeds_only_the_leaf_it_shares_with_its_term(
    postgresql: psycopg.Connection, db_url: str, tmp_path: Path
) -> None:
    """A definition list's term and its description are one leaf: editing the description re-embeds that leaf."""
    entries = [block for i in range(20) for block in (f"OPTION_{i} (boolean)", f"Turns feature {i} on.")]
    path = tmp_path / "options.md"
    path.write_text(_doc(entries), encoding="utf-8")
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    assert hrag.ingest([path]).results[0].embedded == 20, "one text per term and its description"
    entries[15] = "Turns feature 7 on, and feature 8 off."
    path.write_text(_doc(entries), encoding="utf-8")
    result = hrag.ingest([path]).results[0]
    postgresql.commit()
    assert result.status == "updated" and result.embedded == 1
    assert postgresql.execute("SELECT count(*) FROM hrag.nodes WHERE content = %s",
                              ("OPTION_7 (boolean)\n\nTurns feature 7 on, and feature 8 off.",)).fetchone()[0] == 1


def test_adding_a_paragraph_replaces_the_tree_consistently(postgresql: psycopg.Connection, db_url: str,
                                                           tmp_path: Path, paragraphs: list[str]) -> None:
    path = tmp_path / "handbook.md"
    path.write_text(_doc(paragraphs), encoding="utf-8")
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest([path])
    paragraphs.insert(3, "Rule 2b: umbrellas stay at the entrance.")
    path.write_text(_doc(paragraphs), encoding="utf-8")
    result = hrag.ingest([path]).results[0]
    assert result.status == "updated" and result.embedded == 1
    root = postgresql.execute("SELECT id FROM hrag.nodes WHERE parent_id IS NULL").fetchone()[0]
    text = postgresql.execute("SELECT hrag.node_text(%s)", (root,)).fetchone()[0]
    assert text.split("\n\n")[2:] == paragraphs
    assert hrag.repository.check_integrity() == []
