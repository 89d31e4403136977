"""The in-memory tree every ingestion strategy produces and the repository stores.

A strategy (headings, clauses, pages, code, window) turns a document into a
:class:`DraftNode` tree; child splitters refine its leaves.  Nothing here
touches the database: :mod:`hrag_pg.ingest.flatten` numbers the tree in
pre-order and derives ids, hashes and counts; :mod:`hrag_pg.repository`
embeds and writes it.

Text is stored once: ``content`` is a node's *own* text (a heading line for a
section, the paragraph for a leaf), and ``separator`` is the exact text that
stood in the document between the previous node with text and this one (a
blank line, two blank lines, a page break, nothing when a split piece
continues the previous one).  A node's full text is therefore its subtree's
contents in document order, joined by their separators, and the root's full
text is the document itself (see :meth:`DraftNode.full_text`).

Markup that no reader sees (reStructuredText targets and directives,
Markdown link reference definitions) is kept in the next node's separator.
Where no node follows or none came before, it is a leaf of kind
:data:`MARKUP_KIND`: stored and returned with its ancestors' text, so the
document stays whole, but neither embedded nor searched.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

#: A leaf of markup only (see the module docstring): text, but no search target.
MARKUP_KIND = "markup"


@dataclass
class DraftNode:
    """One node of a document tree before it is written.

    ``separator`` is the text between the previous node *with content* (in
    document pre-order) and this node's ``content`` in the original
    document; it is ignored for nodes without content and for the first
    node of any full text (see :meth:`full_text`).

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
    #: Original text between the previous node with content and this one (see the class docstring).
    separator: str = "\n\n"

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

    def full_text(self) -> str:
        """Own text plus descendants' in document order, joined by their separators.

        This is exactly what ``hrag.node_text`` computes from the stored rows:
        the content of the first node with content, then ``separator +
        content`` for every later node with content, in pre-order.  Nodes
        without content (roots of most strategies, pages, windows, groups)
        contribute nothing, and neither do "qa" nodes: their content is a
        generated question, which is stored as metadata, not as text.
        """
        return "".join(self.text_parts())

    def text_parts(self) -> list[str]:
        """The pieces :meth:`full_text` joins: contents and the separators between them, in order."""
        parts: list[str] = []
        for node in contents_in_order(self):
            if parts:
                parts.append(node.separator)
            parts.append(node.content)
        return parts


def has_text(node: DraftNode) -> bool:
    """True if ``node`` contributes to the full text (see :meth:`DraftNode.full_text`)."""
    return bool(node.content) and node.kind != "qa"


def contents_in_order(root: DraftNode) -> Iterator[DraftNode]:
    """The nodes of ``root``'s subtree that contribute text, in document order."""
    return (node for node, _ in root.walk() if has_text(node))


@dataclass
class DocumentTree:
    """A parsed document: its root node plus document-level facts."""

    source: str
    root: DraftNode
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
