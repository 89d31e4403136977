"""ParentChunk and ChildChunk: the Python view of a stored parent and its children."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from hrag_pg.api import HRAG
from hrag_pg.models import ChildChunk, ParentChunk
from tests.embedders import HashingEmbedder
from tests.integration.test_ingest_write import WORK_RULES


@pytest.fixture
def hrag(db_url: str) -> Iterator[HRAG]:
    instance = HRAG(db_url, embedder=HashingEmbedder())
    yield instance
    instance.repository.engine.dispose()


def test_parent_chunk_is_the_stored_node_with_its_exact_text_and_its_children(hrag: HRAG) -> None:
    hrag.ingest([WORK_RULES])
    with hrag.repository.engine.connect() as conn:
        article_id, doc_id = conn.execute(
            sa.text("SELECT id, document_id FROM hrag.nodes WHERE title LIKE '第4条%'")).one()
        children = [tuple(r) for r in conn.execute(
            sa.text("SELECT id, content FROM hrag.nodes WHERE parent_id = :id ORDER BY position"),
            {"id": article_id})]
    lines = WORK_RULES.read_text(encoding="utf-8").splitlines()

    parent = hrag.parent_chunk(str(article_id))
    assert isinstance(parent, ParentChunk)
    assert (parent.id, parent.doc_id, parent.title) == (article_id, doc_id, "第4条：諸手当および福利厚生")
    assert parent.content == "\n".join(lines[20:25])
    assert parent.child_ids == [c[0] for c in children] and len(children) == 4

    chunks = hrag.child_chunks(article_id)
    assert all(isinstance(c, ChildChunk) for c in chunks)
    assert [(c.id, c.parent_id, c.doc_id, c.content) for c in chunks] == [
        (cid, article_id, doc_id, content) for cid, content in children]
    assert [c.content for c in chunks] == lines[21:25]


def test_an_unknown_node_has_no_parent_chunk_and_no_children(hrag: HRAG) -> None:
    assert hrag.parent_chunk(uuid.uuid4()) is None
    assert hrag.child_chunks(uuid.uuid4()) == []
