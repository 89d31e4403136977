"""Menus, tables of contents and lone headings are text, not search targets.

They name where the content is, and a search for the content finds them
first: their few words are all title.

A list whose items only point at other nodes (a README's table of contents,
a Sphinx page's list of ``:doc:`` references, texinfo's ``* Menu:`` blocks,
its HTML ``section-toc`` lists and ``table.menu``) repeats the titles of the
sections it lists.  Embedded under its own heading path, an entry such as
"Thread Safety" looks like the perfect answer to "Is libffi thread safe?"
and outranks the section that answers.  The readers give such leaves the kind
:data:`~hrag_pg.ingest.tree_helpers.MENU_KIND`; :func:`demote_navigation` joins each
run of them into one block and stores it as a markup leaf in place: kept, so
the document's text stays whole and its section returns it, but neither
embedded nor searched (like the link definitions of
:mod:`hrag_pg.ingest.tree`).  A list of links that a lead-in introduces
("XMLSec requires the following libraries:") is that lead-in's content, not
a menu: :func:`~hrag_pg.ingest.packing.join_lead_ins` joins the two between
:func:`join_menu_runs` and :func:`demote_navigation`, as it joins any lead-in
to its block.

A page that holds nothing but its menu (a texinfo chapter page: its heading
and the list of its sections) would be left with nothing to search and be
refused; there the menu stays a search target, as one block: a list of many
titles matches one of them far less than the title alone did.

A heading with nothing under it (the next heading follows at once: a
document's title written one level deeper than its sections, texinfo's
subsection heading over its first subsubsection at the same HTML level, an
empty section) is a leaf of its own, searched for its few words.  Search
targets embed their heading path, so a section's content carries its
heading already; a lone heading is stored in place as markup too (headings
strategy only: a clause's heading holds its text).  When nothing else in a
document is searched, its menus and lone headings stay search targets.
"""

from __future__ import annotations

from .tree import MARKUP_KIND, DocumentTree, DraftNode
from .tree_helpers import MENU_CONTAINER_KEY, MENU_KIND

#: A title between two menus is at most this many words.
_TITLE_WORDS = 12
#: A list item that is content (see join_menu_runs).
ITEM_KIND = "item"
#: A heading's node (hrag_pg.ingest.tree_helpers.open_section); a leaf of this kind is a heading alone.
SECTION_KIND = "section"
#: Leaves that are never search targets of their own.
_NOT_SEARCHED = frozenset({MARKUP_KIND, "qa"})


def join_menu_runs(tree: DocumentTree) -> DocumentTree:
    """Join each run of sibling menu leaves (a list's items) into one menu leaf.  Mutates and returns ``tree``.

    A list is a menu only if all its items are: a list of the tools a build needs, one of
    them with its version after the link, is content, all of it.  A list is read as a run of
    sibling items (two lists with nothing between them are one run).
    """
    for node, _ in list(tree.root.walk()):
        if any(child.kind == MENU_KIND for child in node.children):
            _unmark_mixed_lists(node.children)
            node.children = _joined_runs(node.children)
    return tree


def _unmark_mixed_lists(children: list[DraftNode]) -> None:
    """Turn the menu items of a run of list items that also holds another item back into items."""
    run: list[DraftNode] = []
    for child in [*children, None]:
        if child is not None and child.is_leaf and child.kind in (ITEM_KIND, MENU_KIND):
            run.append(child)
            continue
        if any(leaf.kind == ITEM_KIND for leaf in run):
            for leaf in run:
                if leaf.kind == MENU_KIND and not leaf.metadata.get(MENU_CONTAINER_KEY):
                    leaf.kind = ITEM_KIND
        run = []


def demote_navigation(tree: DocumentTree, *, lone_headings: bool = True) -> DocumentTree:
    """Store menu leaves (and, with ``lone_headings``, sections with nothing under their heading)
    as markup, unless nothing else in the document is searched.  Mutates and returns ``tree``.
    """
    join_menu_runs(tree)
    searched = [leaf for leaf in tree.root.leaves() if leaf is not tree.root and leaf.kind not in _NOT_SEARCHED]
    navigation = [leaf for leaf in searched
                  if leaf.kind == MENU_KIND or (lone_headings and leaf.kind == SECTION_KIND)]
    if len(navigation) < len(searched):
        for leaf in navigation:
            leaf.metadata = {**leaf.metadata, "source_kind": leaf.kind}
            leaf.kind = MARKUP_KIND
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


__all__ = ["demote_navigation", "join_menu_runs"]
