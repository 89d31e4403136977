"""Invariants every ingestion test checks: no text lost, no empty leaf."""

from __future__ import annotations

import re
from pathlib import Path

from hrag_pg.ingest.tree import DocumentTree, DraftNode

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

_HEADING_MARKER_RE = re.compile(r"(?m)^[ \t]{0,3}#{1,6}(?=[ \t]|$)")
_SPACE_RE = re.compile(r"\s+")


def comparable(text: str) -> str:
    """Text without whitespace and without Markdown heading markers."""
    return _SPACE_RE.sub("", _HEADING_MARKER_RE.sub("", text))


def assert_text_preserved(source_text: str, tree: DocumentTree) -> None:
    """The tree's full text is the source, modulo whitespace and heading markers."""
    assert comparable(tree.root.full_text()) == comparable(source_text)


def assert_leaves_nonempty(tree: DocumentTree) -> None:
    leaves = tree.root.leaves()
    assert leaves, "tree has no leaves"
    for leaf in leaves:
        assert leaf.content.strip(), f"empty {leaf.kind} leaf"


def shape(node: DraftNode) -> list[tuple[int, str, str | None]]:
    """(depth, kind, key) for every node, for compact structure assertions."""
    return [(len(ancestors), n.kind, n.key) for n, ancestors in node.walk()]


def find(tree: DocumentTree, key: str) -> DraftNode:
    matches = [node for node, _ in tree.root.walk() if node.key == key]
    assert len(matches) == 1, f"{len(matches)} nodes with key {key!r}"
    return matches[0]
