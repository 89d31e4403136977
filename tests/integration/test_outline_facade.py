"""HRAG.outline / children / node and their AsyncHRAG twins on an ingested Markdown file."""

from __future__ import annotations

import uuid

import pytest

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.errors import InvalidArgument
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.models import OutlineEntry
from tests.embedders import HashingEmbedder

HANDBOOK = """# Handbook

Welcome to the handbook.

## Leave

Staff take leave after filing form A-1.

### Sick leave

Call the office before nine.

## Travel

Travel is booked two weeks ahead.
"""


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest_tree(parse_markdown(HANDBOOK, "handbook.md"), collection="manuals")
    h.ingest_tree(parse_markdown("# Notes\n\nA note.\n", "notes.md"), collection="other")
    return h


def test_the_outline_is_the_heading_tree_with_token_counts_in_document_order(hrag: HRAG) -> None:
    entries = hrag.outline(collection="manuals")
    assert [(e.depth, e.kind, e.title) for e in entries] == [
        (0, "document", "Handbook"), (1, "section", "Handbook"), (2, "section", "Leave"),
        (3, "section", "Sick leave"), (2, "section", "Travel")]
    assert all(isinstance(e, OutlineEntry) and e.source == "handbook.md" for e in entries)
    root, h1 = entries[0], entries[1]
    assert root.token_count == h1.token_count > entries[2].token_count > entries[3].token_count > 0
    assert h1.child_count == 3  # the welcome paragraph, Leave, Travel
    assert [e.title for e in hrag.outline(collection="manuals", max_depth=2)] == [
        "Handbook", "Handbook", "Leave", "Travel"]
    assert [e.source for e in hrag.outline(max_depth=0)] == ["handbook.md", "notes.md"]
    assert [e.title for e in hrag.outline(source="notes.md", max_depth=0)] == ["Notes"]


def test_children_and_node_expand_what_the_outline_names(hrag: HRAG) -> None:
    leave = next(e for e in hrag.outline(collection="manuals") if e.title == "Leave")
    children = hrag.children(leave.node_id)
    assert [(c.kind, c.title) for c in children] == [("paragraph", None), ("section", "Sick leave")]
    assert hrag.children(str(children[0].node_id)) == []
    node = hrag.node(leave.node_id)
    assert node is not None and node.title == "Leave" and node.content == hrag.node_text(leave.node_id)
    assert "Call the office before nine." in node.content
    assert hrag.node(uuid.uuid4()) is None and hrag.children(uuid.uuid4()) == []


def test_bad_arguments_are_invalid_arguments_named_like_the_sql_ones(hrag: HRAG) -> None:
    with pytest.raises(InvalidArgument, match=r'^max_depth must be between 0 and 100, got 101'):
        hrag.outline(max_depth=101)
    with pytest.raises(InvalidArgument, match=r'^max_depth must be between 0 and 100, got -1'):
        hrag.outline(max_depth=-1)
    with pytest.raises(InvalidArgument, match=r'^max_depth must be a whole number'):
        hrag.outline(max_depth="2")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match=r"no document 'missing\.md' is stored in collection 'manuals'"):
        hrag.outline(collection="manuals", source="missing.md")
    with pytest.raises(InvalidArgument, match="is not a node id"):
        hrag.children("not-a-uuid")


async def test_the_async_twins_return_what_the_sync_calls_return(hrag: HRAG) -> None:
    entries = hrag.outline()
    leave = next(e for e in entries if e.title == "Leave")
    async with AsyncHRAG(hrag) as ahrag:
        assert await ahrag.outline() == entries
        assert await ahrag.outline(collection="manuals", source="handbook.md", max_depth=1) == hrag.outline(
            collection="manuals", source="handbook.md", max_depth=1)
        assert await ahrag.children(leave.node_id) == hrag.children(leave.node_id)
        assert await ahrag.node(leave.node_id) == hrag.node(leave.node_id)
        with pytest.raises(InvalidArgument, match=r"no document 'missing\.md' is stored"):
            await ahrag.outline(source="missing.md")
