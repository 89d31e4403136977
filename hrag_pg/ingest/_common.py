"""Small helpers shared by the tree builders.

Kept private: the public surface is one ``parse_*`` function per strategy.
"""

from __future__ import annotations

import re

from hrag_pg.ingest.tree import DraftNode

_BLANK_LINE_RE = re.compile(r"\n[ \t\f\v\r]*\n")


def add_child(parent: DraftNode, child: DraftNode) -> DraftNode:
    """Append ``child``; make its key unique among its siblings.

    Keys become ids, so two "Example" headings under one parent must not
    collide: the second becomes "Example (2)".
    """
    if child.key is not None:
        taken = {sibling.key for sibling in parent.children}
        if child.key in taken:
            n = 2
            while f"{child.key} ({n})" in taken:
                n += 1
            child.key = f"{child.key} ({n})"
    parent.children.append(child)
    return child


def add_leaf(parent: DraftNode, kind: str, text: str, **fields: object) -> DraftNode | None:
    """Append a leaf unless ``text`` is blank (empty leaves are never produced)."""
    text = text.strip("\n").rstrip()
    if not text.strip():
        return None
    return add_child(parent, DraftNode(kind=kind, content=text, **fields))  # type: ignore[arg-type]


def split_blocks(text: str) -> list[str]:
    """Blank-line separated blocks, stripped, blanks dropped."""
    return [block.strip() for block in _BLANK_LINE_RE.split(text) if block.strip()]


def has_leaf_text(root: DraftNode) -> bool:
    return any(leaf.content.strip() for leaf in root.leaves())
