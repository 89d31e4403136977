"""hrag.node_text(document_id, node_id): the full text, looked up with the document id (routable on Citus)."""

from __future__ import annotations

import uuid

import psycopg

from hrag_pg import db
from hrag_pg.api import HRAG
from hrag_pg.ingest.markdown import parse_markdown
from tests.embedders import HashingEmbedder

DOC = """# Rules

## Article 4

1. The company pays allowances under this article.

2. Commuting costs are paid in full during probation.
"""


def test_node_text_with_its_document_id_equals_node_text_for_every_node(db_url: str) -> None:
    HRAG(db_url, embedder=HashingEmbedder()).ingest_tree(parse_markdown(DOC, "rules.md"))
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        rows = conn.execute("SELECT hrag.node_text(document_id, id), hrag.node_text(id) FROM hrag.nodes").fetchall()
    assert len(rows) >= 4
    assert all(by_document == by_id for by_document, by_id in rows)
    assert any("Commuting costs" in text for text, _ in rows)


def test_node_text_with_another_documents_id_is_null(db_url: str) -> None:
    HRAG(db_url, embedder=HashingEmbedder()).ingest_tree(parse_markdown(DOC, "rules.md"))
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        node = conn.execute("SELECT id FROM hrag.nodes LIMIT 1").fetchone()[0]  # type: ignore[index]
        assert conn.execute("SELECT hrag.node_text(%s, %s)", (uuid.uuid4(), node)).fetchone() == (None,)
