"""The in-memory tree every ingestion strategy produces and the repository stores.

A strategy (headings, clauses, pages, code, window) turns a document into a
:class:`DraftNode` tree; child splitters refine its leaves.  Nothing here
touches the database: :mod:`hrag_pg.ingest.flatten` numbers the tree in
pre-order and derives ids, hashes and counts; :mod:`hrag_pg.repository`
embeds and writes it.

Text is stored once: ``content`` is a node's *own* text (a heading line for a
section, the paragraph for a leaf), so a node's full text is the
concatenation of its subtree's contents in document order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DraftNode:
    """One node of a document tree before it is written.

    ``overlap_prefix`` is text borrowed from the end of the previous sibling
    when a long paragraph was split: it is prepended to the *embedded* text
    (so a term cut at the boundary is still seen whole) but is not stored in
    ``content`` (so text is not stored twice).
    """

    kind: str
    content: str = ""
    title: str | None = None
    children: list[DraftNode] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    overlap_prefix: str = ""
    #: Explicit structural key (e.g. "第4条", "h2:Install"); positions are used when None.
    key: str | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self) -> Iterator[tuple[DraftNode, tuple[DraftNode, ...]]]:
        """Yield (node, ancestors) in document pre-order."""
        stack: list[tuple[DraftNode, tuple[DraftNode, ...]]] = [(self, ())]
        while stack:
            node, ancestors = stack.pop()
            yield node, ancestors
            for child in reversed(node.children):
                stack.append((child, (*ancestors, node)))

    def leaves(self) -> list[DraftNode]:
        return [node for node, _ in self.walk() if node.is_leaf]

    def full_text(self, separator: str = "\n\n") -> str:
        """Own text plus descendants' in document order (what hrag.node_text returns)."""
        return separator.join(node.content for node, _ in self.walk() if node.content)


@dataclass
class DocumentTree:
    """A parsed document: its root node plus document-level facts."""

    source: str
    root: DraftNode
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
