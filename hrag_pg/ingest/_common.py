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


def open_section(stack: list[tuple[int, DraftNode]], level: int, text: str) -> DraftNode:
    """Open a heading's section: close sections at this level or deeper, nest under the nearest shallower one.

    ``stack`` holds (level, node) pairs from the root (level 0) down; Markdown
    and HTML headings both build their trees this way.
    """
    while stack[-1][0] >= level:
        stack.pop()
    node = DraftNode(kind="section", content=text, title=text, key=text, metadata={"level": level})
    add_child(stack[-1][1], node)
    stack.append((level, node))
    return node
