"""Menus and tables of contents are text, not search targets.

A list whose items only point at other nodes (a README's table of contents,
a Sphinx page's list of ``:doc:`` references, texinfo's ``* Menu:`` blocks,
its HTML ``section-toc`` lists and ``table.menu``) repeats the titles of the
sections it lists.  Embedded under its own heading path, an entry such as
"Thread Safety" looks like the perfect answer to "Is libffi thread safe?"
and outranks the section that answers.  The readers give such leaves the kind
:data:`~hrag_pg.ingest._common.MENU_KIND`; :func:`demote_menus` joins each
run of them into one block and stores it as a markup leaf in place: kept, so
the document's text stays whole and its section returns it, but neither
embedded nor searched (like the link definitions of
:mod:`hrag_pg.ingest.tree`).  A list of links that a lead-in introduces
("XMLSec requires the following libraries:") is that lead-in's content, not
a menu: :func:`~hrag_pg.ingest.packing.join_lead_ins` joins the two between
:func:`join_menu_runs` and :func:`demote_menus`, as it joins any lead-in to
its block.

A page that holds nothing but its menu (a texinfo chapter page: its heading
and the list of its sections) would be left with nothing to search and be
refused; there the menu stays a search target, as one block: a list of many
titles matches one of them far less than the title alone did.
"""

from __future__ import annotations

from ._common import MENU_KIND
from .tree import MARKUP_KIND, DocumentTree, DraftNode

#: A title between two menus is at most this many words.
_TITLE_WORDS = 12
#: Leaves that are never search targets of their own.
_NOT_SEARCHED = frozenset({MARKUP_KIND, "qa"})


def join_menu_runs(tree: DocumentTree) -> DocumentTree:
    """Join each run of sibling menu leaves (a list's items) into one menu leaf.  Mutates and returns ``tree``."""
    for node, _ in list(tree.root.walk()):
        if any(child.kind == MENU_KIND for child in node.children):
            node.children = _joined_runs(node.children)
    return tree


def demote_menus(tree: DocumentTree) -> DocumentTree:
    """Store menu leaves as markup, unless nothing else in the document is searched.

    Mutates and returns ``tree``.
    """
    join_menu_runs(tree)
    searched = [leaf for leaf in tree.root.leaves() if leaf is not tree.root and leaf.kind not in _NOT_SEARCHED]
    if any(leaf.kind != MENU_KIND for leaf in searched):
        for leaf in searched:
            if leaf.kind == MENU_KIND:
                leaf.kind = MARKUP_KIND
                leaf.metadata = {**leaf.metadata, "source_kind": MENU_KIND}
    return tree


def _is_menu(node: DraftNode | None) -> bool:
    return node is not None and node.kind == MENU_KIND and node.is_leaf


def _is_title(node: DraftNode) -> bool:
    """A line between two menus' entries (texinfo's "Invoking" above that chapter's entries)."""
    text = node.content.strip()
    return node.kind == "paragraph" and "\n" not in text and len(text.split()) <= _TITLE_WORDS and not text.endswith(
        (".", ":"))


def _joined_runs(children: list[DraftNode]) -> list[DraftNode]:
    out: list[DraftNode] = []
    for i, child in enumerate(children):
        previous = out[-1] if out else None
        following = children[i + 1] if i + 1 < len(children) else None
        title = _is_title(child) and child.is_leaf and _is_menu(following)
        if _is_menu(previous) and (_is_menu(child) or title):
            assert previous is not None
            previous.content += child.separator + child.content
        else:
            out.append(child)
    return out


__all__ = ["demote_menus", "join_menu_runs"]
