"""Markdown → tree by headings (the "headings" strategy).

ATX headings ``#``…``######`` and setext headings (a paragraph underlined
with ``===`` for level 1 or ``---`` for level 2) become nested "section"
nodes; the blocks under a heading (paragraphs, list items, fenced code,
tables, block quotes) become its leaves.  A heading's ``content`` is its
lines as written (``## Install``, or ``Install`` and its underline) and its
title the text without the markers (a setext heading's lines joined by one
space); every node's ``separator`` is the text that stood before it (one
blank line, two, none), so the root's full text is the document.  Lines
starting with ``#`` inside fenced code are code, not headings (shell
comments, Python comments).

This is a line-oriented reader for the common subset of CommonMark, not a
full implementation: indented code blocks are read as paragraphs, which
loses no text.  A setext underline counts only right after paragraph lines
whose first line is neither indented four columns (indented code, such as
psql output over a ``-----`` rule) nor itself an underline (YAML front
matter between ``---`` lines stays text); an underline after a blank line,
a list item or a block quote stays text as before.  In plain text (not
Markdown files) one line underlined with ``***`` or ``~~~`` at least as long
as itself is a level-1 heading too: texinfo's plain text marks its chapters
so (gdb's README, util-linux's ``parse-date.txt``) and valgrind's READMEs
their titles; read as Markdown, the stars were a paragraph's second line
and the tildes opened a fence that swallowed the rest of the file as code.

An HTML comment (``<!-- ... -->``, CommonMark's HTML block of type 2) is one
block however many lines it spans: a leaf of its own, whatever its lines
look like.  Node.js' documentation holds a ``<!-- YAML added: v0.1.26 -->``
block above nearly every API, whose lines were read as list items of a few
tokens each (measured on that corpus: 2,034 fewer search targets, recall the
same or higher in every mode, bench/results/budget-nodejs.md).  Keeping a
comment in the next node's separator instead (as the reStructuredText
reader keeps its markup), or in the next block, lost a narrow question
there: the comment leaf, embedded under its API's heading, is evidence for
that API's section.

Link reference definitions (``[label]: https://...``) render as nothing:
they are kept in the next node's separator, as the reStructuredText reader
keeps its hyperlink targets, and at the start or the end of the document
(Node.js' pages end with hundreds) in a markup leaf, which is not searched.
So are MyST's targets (``(label)=``) and its navigation fences
(```` ```{toctree} ````), as the reStructuredText reader reads their rST forms;
its other directive fences are code (```` ```{code-block} python ````) or,
like ```` ```{note} ````, prose.

A list item of links only (``- [Install](#install)``, a README's table of
contents) and, in plain text, texinfo's ``* Menu:`` and its entries are
"menu" leaves, stored but not searched (:mod:`hrag_pg.ingest.navigation`).
"""

from __future__ import annotations

import re

from hrag_pg.ingest.plaintext import PlainHeadings
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import MENU_KIND, LineReader, directive_kind, lone_title, only_links
from hrag_pg.ingest.tree_helpers import is_blank as _is_blank

_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_CLOSING_HASHES_RE = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_LIST_RE = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_QUOTE_RE = re.compile(r"^ {0,3}>")
_TABLE_DELIMITER_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_SETEXT_UNDERLINE_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_COMMENT_START_RE = re.compile(r"^ {0,3}<!--")
# In plain text, a line of "*" or "~" at least as long as the one line above it underlines a title
# too: texinfo's plain text marks its chapters so, and valgrind's READMEs their titles.
_PLAIN_UNDERLINE_RE = re.compile(r"^(?:\*{3,}|~{3,})[ \t]*$")
# A link reference definition: "[label]: destination", an optional title after it (CommonMark
# 4.7).  The destination may stand on the next line, and the title too; a label holds a
# non-blank character and no unescaped bracket.  Footnotes ("[^1]: Ibid.") are content, and so
# is "[Note]: read this" (text after the destination that is no title): paragraphs.
_TITLE = r"""(?:"[^"]*"|'[^']*'|\([^()]*\))"""
_DESTINATION = r"(?:<[^<>\n]*>|[^\s<]\S*)"
_DEFINITION_RE = re.compile(
    rf"^ {{0,3}}\[(?!\^)(?=[ \t]*[^\s\]])(?:[^\[\]\\]|\\.)+\]:[ \t]*"
    rf"(?P<destination>{_DESTINATION}(?:[ \t]+(?P<title>{_TITLE}))?)?[ \t]*$")
_DESTINATION_LINE_RE = re.compile(rf"^[ \t]*{_DESTINATION}(?:[ \t]+(?P<title>{_TITLE}))?[ \t]*$")
_TITLE_LINE_RE = re.compile(rf"^[ \t]*{_TITLE}[ \t]*$")
# A MyST target, "(label)=" on its own line before a heading: rST's ".. _label:".
_MYST_TARGET_RE = re.compile(r"^ {0,3}\([^()\s]+\)=[ \t]*$")
# A link: inline ("[text](destination)", an image "![alt](src)" too), full reference
# ("[text][label]") or autolink ("<https://...>").  "[x]" alone (a task box, a shortcut reference)
# and "<text>" are not: a list of them is no menu.
_LINK_RE = re.compile(
    r"!?\[(?:[^\[\]\\]|\\.|\[(?:[^\[\]\\]|\\.)*\])*\]"
    r"(?:\((?:[^()\\]|\\.|\([^()]*\))*\)|\[(?:[^\[\]\\]|\\.)+\])"
    r"|<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*>")
_ITEM_MARKER_RE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)", re.MULTILINE)
# Texinfo's menus in plain text (Info files): "* Menu:", then entries "* Node::  description" or,
# inside a menu, "* Entry: Node.  description", whose description may wrap onto indented lines.
_TEXINFO_MENU_RE = re.compile(r"^\* Menu:[ \t]*$")
_TEXINFO_ENTRY_RE = re.compile(r"^\* [^:\n]+::")
_TEXINFO_NAMED_ENTRY_RE = re.compile(r"^\* [^:\n]+:[ \t]+(?:\([^()\n]+\))?[^.,\t\n]+[.,\t]")


def heading_of(line: str) -> tuple[int, str] | None:
    """(level, text) if ``line`` is an ATX heading, else None."""
    match = _HEADING_RE.match(line)
    if not match:
        return None
    text = _CLOSING_HASHES_RE.sub("", match.group(2) or "").strip()
    return len(match.group(1)), text


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def has_markdown_headings(lines: list[str]) -> bool:
    """Whether any line is an ATX heading or a setext underline under a line of text."""
    return any(
        heading_of(line) is not None or (i and _SETEXT_UNDERLINE_RE.match(line) and lines[i - 1].strip())
        for i, line in enumerate(lines)
    )


class _Reader(LineReader):
    """Walks the lines once, appending nodes to the current section.

    With ``plain_headings`` (plain text without a Markdown heading) lines that
    stand alone as headings open sections too (:mod:`hrag_pg.ingest.plaintext`).
    """

    def __init__(self, text: str, *, plain_headings: bool = False) -> None:
        super().__init__(text)
        self.plain = PlainHeadings(self.lines) if plain_headings and not has_markdown_headings(self.lines) else None
        self.plain_text = plain_headings
        self.in_texinfo_menu = False  # the last block was a texinfo "* Menu:" or one of its entries

    def read(self) -> DraftNode:
        while self.i < len(self.lines):
            line = self.lines[self.i]
            plain = self.plain.at(self.i) if self.plain is not None and not _is_blank(line) else None
            if _is_blank(line):
                self.i += 1
            elif plain is not None:
                self._heading(self.i, self.i + 1, *plain)
            elif _FENCE_RE.match(line):
                self._fence()
            elif _COMMENT_START_RE.match(line):
                self._comment()
            elif (atx := self._atx(self.i)) is not None:
                self._atx_heading(*atx)
            elif self._starts_table():
                self._table()
            elif _QUOTE_RE.match(line):
                self._quote()
            elif _LIST_RE.match(line):
                self._list_item()
                continue  # (a list item keeps a texinfo menu open)
            elif (definition_end := self._definition_end(self.i)) is not None:
                self._definitions(definition_end)
            elif _MYST_TARGET_RE.match(line):
                self._markup(self.i, self.i + 1)
            else:
                self._paragraph()
            if not _is_blank(line):
                self.in_texinfo_menu = False
        self._trailing_markup()
        return self.root

    def _definition_end(self, i: int) -> int | None:
        """Index just past the link reference definition at line ``i`` (None if there is none)."""
        match = _DEFINITION_RE.match(self.lines[i])
        if match is None:
            return None
        after = self.lines[i + 1] if i + 1 < len(self.lines) else ""
        if match.group("destination") is None:  # "[label]:" alone: the destination must follow
            match = _DESTINATION_LINE_RE.match(after)
            if match is None:
                return None
            i += 1
            after = self.lines[i + 1] if i + 1 < len(self.lines) else ""
        if match.group("title") is None and _TITLE_LINE_RE.match(after):
            i += 1  # the title on a line of its own
        return i + 1

    def _definitions(self, end: int) -> None:
        """Consecutive link reference definitions from ``self.i`` (the first ends at ``end``): markup."""
        while end < len(self.lines) and (following := self._definition_end(end)) is not None:
            end = following
        self._markup(self.i, end)

    def _comment(self) -> None:
        """An HTML comment up to the line holding its ``-->`` (end of file if unclosed): one leaf."""
        start = self.i
        j, after = start, self.lines[start].index("<!--") + 4
        while j < len(self.lines) and "-->" not in self.lines[j][after if j == start else 0:]:
            j += 1
        self.i = min(j + 1, len(self.lines))
        self._leaf("paragraph", start, self.i)

    def _atx_heading(self, level: int, text: str) -> None:
        if not text:
            # A bare "#" carries no text and no structure worth a section; it stays as text.
            self._leaf("paragraph", self.i, self.i + 1)
            self.i += 1
            return
        self._heading(self.i, self.i + 1, level, text)

    def _fence_end(self, start: int) -> int:
        """Index just past the fence opened at ``start`` (end of file if unclosed)."""
        return self._fence_span(start)[0]

    def _fence_span(self, start: int) -> tuple[int, bool]:
        """(index just past the fence opened at ``start``, whether a closing line was found)."""
        # Stripped: a fence inside a list item may be indented deeper than a top-level one.
        match = _FENCE_RE.match(self.lines[start].strip())
        if match is None:  # not a fence after all: the block is this line alone
            return start + 1, True
        marker = match.group(2)
        closing = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        j = start + 1
        while j < len(self.lines) and not closing.match(self.lines[j]):
            j += 1
        return min(j + 1, len(self.lines)), j < len(self.lines)

    def _fence(self) -> None:
        match = _FENCE_RE.match(self.lines[self.i])
        assert match is not None
        end, closed = self._fence_span(self.i)
        words = match.group(3).strip().split()
        language = words[0] if words else None
        if language and language.startswith("{") and language.endswith("}"):
            self._myst_directive(language[1:-1], words[1:], end, closed)
            return
        metadata = {"language": language} if language else {}
        self._leaf("code", self.i, end, metadata=metadata)
        self.i = end

    def _myst_directive(self, name: str, arguments: list[str], end: int, closed: bool) -> None:
        """A MyST directive fence (```` ```{name} argument ````), read as its rST form is read."""
        kind = directive_kind(name)
        if kind == "markup" and closed:
            # navigation, as rST's ``.. toctree::`` (an unclosed one runs to the end of the file:
            # as markup it would hide what follows, so it stays a searched leaf)
            self._markup(self.i, end)
        elif kind == "code":
            self._leaf("code", self.i, end, metadata={"language": arguments[0]} if arguments else {})
        else:  # an admonition (note, warning, versionadded): prose
            self._leaf("paragraph", self.i, end, metadata={"directive": name})
        self.i = end

    def _atx(self, i: int) -> tuple[int, str] | None:
        """(level, text) if line ``i`` is an ATX heading, else None.

        In plain text a ``#`` line right under a line of text (a root prompt under a command, a
        comment in a shell session) is no heading, nor is one of a run of ``#`` lines of one
        level (a comment block): read as headings, each was a section with nothing under it.
        """
        heading = heading_of(self.lines[i])
        if heading is None or not self.plain_text:
            return heading
        above = self.lines[i - 1] if i else ""
        below = self.lines[i + 1] if i + 1 < len(self.lines) else ""
        above_heading, below_heading = heading_of(above), heading_of(below)
        if above.strip() and above_heading is None:
            return None
        if any(h is not None and h[0] == heading[0] for h in (above_heading, below_heading)):
            return None
        return heading

    def _interrupts(self, line: str) -> bool:
        """Whether ``line`` (the current line) ends the block before it."""
        return bool(
            _is_blank(line)
            or _FENCE_RE.match(line)
            or self._atx(self.i)
            or _QUOTE_RE.match(line)
            or _LIST_RE.match(line)
            or _COMMENT_START_RE.match(line)
        )

    def _starts_table(self) -> bool:
        nxt = self.i + 1
        return (
            "|" in self.lines[self.i]
            and nxt < len(self.lines)
            and bool(_TABLE_DELIMITER_RE.match(self.lines[nxt]))
            and "-" in self.lines[nxt]
        )

    def _table(self) -> None:
        start = self.i
        self.i += 2
        while (
            self.i < len(self.lines)
            and "|" in self.lines[self.i]
            and not _is_blank(self.lines[self.i])
        ):
            self.i += 1
        self._leaf("table", start, self.i)

    def _quote(self) -> None:
        start = self.i
        self.i += 1
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if _is_blank(line) or _FENCE_RE.match(line) or heading_of(line):
                break
            self.i += 1
        self._leaf("paragraph", start, self.i)

    def _list_item(self) -> None:
        """One top-level item with its continuation lines and nested items."""
        start = self.i
        base = _indent(self.lines[start])
        self.i += 1
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if _is_blank(line):
                j = self.i
                while j < len(self.lines) and _is_blank(self.lines[j]):
                    j += 1
                if j < len(self.lines) and _indent(self.lines[j]) > base:
                    self.i = j  # blank lines inside a loose item
                    continue
                break
            indented = _indent(line) > base
            if _FENCE_RE.match(line.strip()) and indented:
                self.i = self._fence_end(self.i)  # code inside the item, '#' lines included
                continue
            if indented:
                self.i += 1
                continue
            if self._interrupts(line) or self._starts_table():
                break
            self.i += 1  # lazy continuation line
        self._leaf(self._item_kind(start, self.i), start, self.i)

    def _item_kind(self, start: int, stop: int) -> str:
        """"menu" for an item of links only or a texinfo menu's entry (see _common.MENU_KIND), else "item"."""
        lines = self.lines[start:stop]
        if self.plain_text and self._texinfo_menu_item(lines):
            return MENU_KIND
        self.in_texinfo_menu = False
        return MENU_KIND if only_links("\n".join(lines), _LINK_RE, _ITEM_MARKER_RE) else "item"

    def _texinfo_menu_item(self, lines: list[str]) -> bool:
        """Whether an item is texinfo's "* Menu:" or one of its entries (plain text only).

        An entry's description may wrap onto indented lines; after a blank line only a menu
        comment may follow (a title such as " -- The Detailed Node Listing --", one short line
        that is no sentence), anything else is content.  "* Entry: Node." is an entry only
        inside a menu ("* Note: read this." is not).
        """
        while lines and _is_blank(lines[-1]):
            lines = lines[:-1]
        first, rest = lines[0], lines[1:]
        if _TEXINFO_MENU_RE.match(first):
            self.in_texinfo_menu = not rest
        elif _TEXINFO_ENTRY_RE.match(first) or (self.in_texinfo_menu and _TEXINFO_NAMED_ENTRY_RE.match(first)):
            self.in_texinfo_menu = _entry_continues(rest)
        else:
            self.in_texinfo_menu = False
        return self.in_texinfo_menu

    def _paragraph(self) -> None:
        """Lines up to the next blank line or block start, or a setext heading if they are underlined."""
        start = self.i
        first = self.lines[start]
        # Indented code (psql output over a rule) and front matter's opening "---" take no underline.
        may_be_heading = _indent(first) < 4 and not _SETEXT_UNDERLINE_RE.match(first)
        self.i += 1
        while self.i < len(self.lines):
            line = self.lines[self.i]
            # (in plain text a title is one line, or one under an overline of "*" as coreutils'
            # README writes them: several lines over a rule are a paragraph and a rule)
            one_line = (not self.plain_text or self.i == start + 1
                        or (self.i == start + 2 and _PLAIN_UNDERLINE_RE.match(first) is not None))
            underline = _SETEXT_UNDERLINE_RE.match(line) if may_be_heading and one_line else None
            if underline:
                self._setext_heading(start, 1 if underline.group(1)[0] == "=" else 2)
                return
            if (may_be_heading and self.plain_text and self.i == start + 1 and _PLAIN_UNDERLINE_RE.match(line)
                    and len(line.rstrip()) >= len(first.rstrip()) and any(c.isalnum() for c in first)):
                self._setext_heading(start, 1)
                return
            if self._interrupts(line):
                break
            self.i += 1
        self._leaf("paragraph", start, self.i)

    def _setext_heading(self, start: int, level: int) -> None:
        """Lines ``start`` up to the underline at ``self.i`` as one heading of ``level``."""
        text = " ".join(line.strip() for line in self.lines[start : self.i]).strip()
        self._heading(start, self.i + 1, level, text)


def _entry_continues(lines: list[str]) -> bool:
    """Whether ``lines`` after a texinfo menu entry's first line are its description's indented lines,
    then at most one menu comment after a blank line (see :meth:`_Reader._texinfo_menu_item`)."""
    if any(_is_blank(line) for line in lines):
        blank = next(i for i, line in enumerate(lines) if _is_blank(line))
        comment = [line for line in lines[blank:] if not _is_blank(line)]
        words = comment[0].split() if len(comment) == 1 else []
        if not 0 < len(words) <= 12 or words[-1].endswith((".", ":")):
            return False
        lines = lines[:blank]
    return all(line[:1].isspace() for line in lines)


def parse_markdown(text: str, source: str, *, title: str | None = None,
                   plain_headings: bool = False) -> DocumentTree:
    """Build a heading tree from Markdown.

    The document title is ``title`` if given, else the text of its H1 if it
    has exactly one (see :func:`lone_title`).  Heading level L nests under
    the nearest earlier heading of level < L, so skipped levels (an H3
    straight under an H1) are fine.  ``plain_headings`` is for plain text
    (``.txt``, README, NEWS): if the text has no Markdown heading, lines that
    stand alone as headings (``III. Reading``, ``Setup``) open sections; see
    :mod:`hrag_pg.ingest.plaintext`.
    """
    reader = _Reader(text, plain_headings=plain_headings)
    root = reader.read()
    doc_title = title if title is not None else lone_title(reader.top_titles)
    root.title = doc_title
    return DocumentTree(
        source=source, root=root, title=doc_title, metadata={"strategy": "headings"}
    )


__all__ = ["has_markdown_headings", "heading_of", "parse_markdown"]
