"""The nodes table makes impossible trees unrepresentable."""

from __future__ import annotations

import uuid

import psycopg
import pytest


def _doc(conn: psycopg.Connection, source: str = "a.md", collection: str = "default") -> uuid.UUID:
    doc_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO hrag.documents (id, collection, source, content_hash) VALUES (%s, %s, %s, 'h')",
        (doc_id, collection, source),
    )
    return doc_id


def _node(
    conn: psycopg.Connection, doc_id: uuid.UUID, parent: uuid.UUID | None, depth: int, seq: int,
    *, collection: str = "default", embedding: str | None = None, subtree_end: int | None = None,
) -> uuid.UUID:
    node_id = uuid.uuid4()
    conn.execute(
        """INSERT INTO hrag.nodes (id, document_id, collection, parent_id, depth, position, kind,
                                   content, seq, subtree_end, content_hash, embedding)
           VALUES (%s, %s, %s, %s, %s, 0, 'paragraph', 'x', %s, %s, 'h', %s::vector)""",
        (node_id, doc_id, collection, parent, depth, seq, subtree_end if subtree_end is not None else seq,
         embedding),
    )
    return node_id


def test_deleting_a_parent_cascades_to_its_whole_subtree(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql)
    root = _node(postgresql, doc, None, 0, 0, subtree_end=3)
    chapter = _node(postgresql, doc, root, 1, 1, subtree_end=3)
    article = _node(postgresql, doc, chapter, 2, 2, subtree_end=3)
    _node(postgresql, doc, article, 3, 3)
    postgresql.execute("DELETE FROM hrag.nodes WHERE id = %s", (chapter,))
    assert postgresql.execute("SELECT count(*) FROM hrag.nodes").fetchone() == (1,)


def test_deleting_a_document_removes_its_tree(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql)
    root = _node(postgresql, doc, None, 0, 0, subtree_end=1)
    _node(postgresql, doc, root, 1, 1)
    postgresql.execute("DELETE FROM hrag.documents WHERE id = %s", (doc,))
    assert postgresql.execute("SELECT count(*) FROM hrag.nodes").fetchone() == (0,)


def test_a_node_cannot_point_at_a_parent_in_another_document(postgresql: psycopg.Connection) -> None:
    first, second = _doc(postgresql, "a.md"), _doc(postgresql, "b.md")
    root_a = _node(postgresql, first, None, 0, 0)
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="nodes_parent_fk"):
        _node(postgresql, second, root_a, 1, 1)


def test_depth_must_be_parent_depth_plus_one(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql)
    root = _node(postgresql, doc, None, 0, 0, subtree_end=5)
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="nodes_parent_fk"):
        _node(postgresql, doc, root, 2, 1)


def test_a_root_must_have_depth_zero(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql)
    with pytest.raises(psycopg.errors.CheckViolation, match="nodes_root_has_depth_zero"):
        _node(postgresql, doc, None, 1, 0)


def test_a_node_cannot_claim_another_collection_than_its_document(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql, collection="tenant_a")
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="nodes_document_fk"):
        _node(postgresql, doc, None, 0, 0, collection="tenant_b")


def test_a_vector_of_the_wrong_dimension_is_refused_with_both_numbers(postgresql: psycopg.Connection) -> None:
    doc = _doc(postgresql)
    with pytest.raises(psycopg.errors.DataException, match="expected 384 dimensions, not 3"):
        _node(postgresql, doc, None, 0, 0, embedding="[1,2,3]")


def test_metadata_must_be_a_json_object(postgresql: psycopg.Connection) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        postgresql.execute(
            "INSERT INTO hrag.documents (id, source, content_hash, metadata) VALUES (%s, 's', 'h', '[1]')",
            (uuid.uuid4(),),
        )
