"""Small helpers shared by the tree builders.

Kept private: the public surface is one ``parse_*`` function per strategy.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Literal, TypeVar

from hrag_pg.ingest.tree import MARKUP_KIND, DraftNode

# Sphinx directives that hold navigation or markup, not text a question would be answered by,
# and those whose body is code (their argument names the language); see directive_kind.
_MARKUP_DIRECTIVES = frozenset({
    "toctree", "index", "highlight", "contents", "sectnum", "include", "meta", "raw", "image",
    "currentmodule", "default-role", "role", "tabularcolumns", "autosummary",
})
_CODE_DIRECTIVES = frozenset({"code", "code-block", "sourcecode", "literalinclude", "doctest", "testcode"})
_BLANK_LINE_RE = re.compile(r"\n[ \t\f\v\r]*\n")
_Level = TypeVar("_Level", int, float)


def normalise_text(text: str) -> str:
    """The text every reader works on: a leading BOM dropped, CRLF and CR turned into LF.

    Together with the leading and trailing whitespace of the whole document
    (which no node holds), this is the only difference between a document
    and ``node_text`` of its root.
    """
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


class TextCursor:
    """Cuts node contents out of one text, in document order, and records what lies between.

    Every reader that works on text hands its nodes' spans to :meth:`take` in
    document order; the text between the end of the previous content and the
    start of the next one (blank lines, markers a reader skipped, a page
    break) becomes the next node's ``separator``, so the tree reproduces the
    document exactly.  Contents are trimmed: trailing whitespace and leading
    blank lines move into the separators (``lstrip=True``, and always for
    the document's first content, moves all leading whitespace).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.end: int | None = None  # end of the last content handed out
        self._line_starts: list[int] | None = None

    def take(self, start: int, end: int, *, lstrip: bool = False) -> tuple[str, str] | None:
        """(separator, content) of ``text[start:end]`` trimmed, or None if it is blank."""
        text = self.text
        while end > start and text[end - 1].isspace():
            end -= 1
        if lstrip or self.end is None:
            while start < end and text[start].isspace():
                start += 1
        else:
            while start < end:
                newline = text.find("\n", start, end)
                if newline < 0 or text[start:newline].strip():
                    break
                start = newline + 1  # a blank line: it belongs to the separator
        if start >= end:
            return None
        previous = self.end if self.end is not None else 0
        if start < previous:
            raise ValueError(f"node text at offset {start} overlaps the previous node (ends at {previous})")
        self.end = end
        return text[previous:start], text[start:end]

    def node(self, start: int, end: int, kind: str, *, lstrip: bool = False, **fields: object) -> DraftNode | None:
        """A node whose content is ``text[start:end]`` trimmed (None if blank)."""
        taken = self.take(start, end, lstrip=lstrip)
        if taken is None:
            return None
        separator, content = taken
        return DraftNode(kind=kind, content=content, separator=separator, **fields)  # type: ignore[arg-type]

    def leaf(self, parent: DraftNode, start: int, end: int, kind: str, *, lstrip: bool = False,
             **fields: object) -> DraftNode | None:
        """Append a leaf cut from ``text[start:end]`` unless it is blank."""
        node = self.node(start, end, kind, lstrip=lstrip, **fields)
        return add_child(parent, node) if node is not None else None

    # -- lines (0-based indexes into text.split("\n")) -------------------------------
    @property
    def line_starts(self) -> list[int]:
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            pos = find("\n")
            while pos >= 0:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
            self._line_starts = starts
        return self._line_starts

    def lines_span(self, first: int, stop: int) -> tuple[int, int]:
        """Offsets of lines ``first`` up to (not including) ``stop``, without the last newline."""
        starts = self.line_starts
        end = starts[stop] - 1 if stop < len(starts) else len(self.text)
        return starts[first], max(end, starts[first])


def directive_kind(name: str) -> Literal["markup", "code", "paragraph"]:
    """How a Sphinx directive's block is read, written ``.. name::`` (reStructuredText) or
    ```` ```{name} ```` (MyST Markdown) alike: navigation and markup (``toctree``, ``index``)
    are markup, code directives (``code-block``) code, the rest (``note``, ``versionadded``)
    prose.  A domain prefix (``sphinx:toctree``, ``py:function``) and case do not matter."""
    name = name.lower().rsplit(":", 1)[-1]
    if name in _MARKUP_DIRECTIVES:
        return "markup"
    return "code" if name in _CODE_DIRECTIVES else "paragraph"


#: Leaves that only point at other nodes: a list of links or cross-references, a texinfo menu
#: (see :mod:`hrag_pg.ingest.navigation`).  Readers give them this kind; refining stores them as markup.
MENU_KIND = "menu"
#: Metadata of a menu that is one by its markup (texinfo's ``table.menu``), not by its items' links.
MENU_CONTAINER_KEY = "menu"
# What remains of a menu's text once its links are taken out: no letter or digit.
_WORD_CHAR_RE = re.compile(r"[^\W_]")


def only_links(text: str, link: re.Pattern[str], marker: re.Pattern[str]) -> bool:
    """Whether ``text`` is list items (``marker`` at each line's start) holding nothing but links
    (``link``) and punctuation: a table of contents, not a passage."""
    body = marker.sub("", text)
    return link.search(body) is not None and _WORD_CHAR_RE.search(link.sub(" ", body)) is None


def is_blank(line: str) -> bool:
    return not line.strip()


class LineReader:
    """Base of the line-oriented readers (Markdown, reStructuredText): one pass over the lines,
    leaves cut out of the text in order and appended to the innermost open section.

    ``stack`` holds (level, node) pairs from the root down (see :func:`open_section`).
    """

    def __init__(self, text: str) -> None:
        self.cursor = TextCursor(normalise_text(text))
        self.lines = self.cursor.text.split("\n")
        self.i = 0
        self.root = DraftNode(kind="document", content="")
        self.stack: list[tuple[int, DraftNode]] = [(0, self.root)]
        self.top_titles: list[str] = []  # the level-1 headings, for :func:`lone_title`

    @property
    def current(self) -> DraftNode:
        return self.stack[-1][1]

    def _leaf(self, kind: str, start: int, stop: int, **fields: Any) -> None:
        """A leaf holding lines ``start`` up to ``stop`` (exclusive)."""
        self.cursor.leaf(self.current, *self.cursor.lines_span(start, stop), kind, **fields)

    def _markup(self, start: int, stop: int) -> None:
        """Lines ``start`` up to ``stop`` hold markup, not content: they go into the next node's
        separator, or into a markup leaf if no node came before (text before the first node
        has no holder)."""
        if self.cursor.end is None:
            self._leaf(MARKUP_KIND, start, stop)
        self.i = stop

    def _trailing_markup(self) -> None:
        """Markup after the last node has no next node to hold it: a markup leaf of the root.

        Of the root, not of the last section: it belongs to the whole document (a link
        target may serve any section), and a section returned as context should not carry it.
        """
        self.cursor.leaf(self.root, self.cursor.end or 0, len(self.cursor.text), MARKUP_KIND)

    def _heading(self, start: int, stop: int, level: int, text: str) -> None:
        """Open the section of a heading written on lines ``start`` up to ``stop`` (markers included)."""
        if level == 1:
            self.top_titles.append(text)
        taken = self.cursor.take(*self.cursor.lines_span(start, stop))
        assert taken is not None  # a heading's lines hold its text
        separator, content = taken
        open_section(self.stack, level, text, content=content, separator=separator)
        self.i = stop


def lone_title(top_titles: list[str]) -> str | None:
    """A document's title from its top-level headings: the heading if there is exactly one.

    With several (a changelog's versions, a README's top-level parts) the
    first names only its own part: as the document's title it would head the
    path of every other part's leaves too, in their embedded text and
    breadcrumbs.
    """
    return top_titles[0] if len(top_titles) == 1 else None


def block_spans(text: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, int]]:
    """(start, end) of the blank-line separated blocks of ``text[start:end]`` (blank blocks included)."""
    end = len(text) if end is None else end
    pos = start
    for match in _BLANK_LINE_RE.finditer(text, start, end):
        yield pos, match.start()
        pos = match.end()
    yield pos, end


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


def has_leaf_text(root: DraftNode) -> bool:
    return any(leaf.content.strip() for leaf in root.leaves())


def close_sections(stack: list[tuple[_Level, DraftNode]], level: _Level) -> DraftNode:
    """Close the open sections at ``level`` or deeper; return the node a new section at ``level`` nests under.

    ``stack`` holds (level, node) pairs from the root (level 0, never closed)
    down, one per open heading: every reader that nests by heading level
    (Markdown, HTML, numbered clauses) keeps its place in the tree this way.
    """
    while stack[-1][0] >= level:
        stack.pop()
    return stack[-1][1]


def open_section(stack: list[tuple[int, DraftNode]], level: int, text: str, *,
                 content: str | None = None, separator: str = "\n\n") -> DraftNode:
    """Open a heading's section: close sections at this level or deeper, nest under the nearest shallower one.

    ``stack`` holds (level, node) pairs from the root (level 0) down; Markdown
    and HTML headings both build their trees this way.  ``text`` is the
    heading's text (title and key); ``content`` is the heading as written
    (Markdown keeps its ``#`` markers), by default ``text``.
    """
    parent = close_sections(stack, level)
    node = DraftNode(kind="section", content=text if content is None else content, title=text, key=text,
                     metadata={"level": level}, separator=separator)
    add_child(parent, node)
    stack.append((level, node))
    return node
