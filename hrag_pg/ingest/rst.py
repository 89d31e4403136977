"""reStructuredText → tree by section titles (the "headings" strategy for ``.rst``).

Sphinx projects, Python packages and many Debian packages document
themselves in reStructuredText; read as plain text, their titles (a line
underlined, optionally also overlined, with punctuation) would be paragraphs
of their own and the leaves would carry no heading path.

As in reStructuredText itself, a title's level is the order in which its
adornment style (character, with or without overline) first appears in the
document.  Under a title, blocks become leaves as in Markdown: paragraphs,
list items, tables, ``.. code-block::`` directives and the indented literal
block after a paragraph ending in ``::`` (both "code"), other directives
(``.. note::`` with its body) as paragraphs.  Markup that is no content
(comments, hyperlink targets, ``toctree``/``index``/``contents`` and similar
directives, transitions, a lone ``::``, and Sphinx's file-wide metadata
such as ``:orphan:`` before the first title) is kept in the next node's
separator, so the root's full text is still the document; before the first
node or after the last it is a markup leaf, which is not searched (see
:mod:`hrag_pg.ingest.tree`).  A list item holding only cross-references and
hyperlink references (a hand-written table of contents) is a "menu" leaf,
stored but not searched either (:mod:`hrag_pg.ingest.navigation`).

This is a line-oriented reader for the common subset of reStructuredText,
not docutils: anything it does not recognise is read as a paragraph, which
loses no text.
"""

from __future__ import annotations

import re
from typing import Any

from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import MENU_KIND, LineReader, directive_kind, lone_title, only_links
from hrag_pg.ingest.tree_helpers import is_blank as _is_blank

# A line of one repeated punctuation character (reStructuredText's adornment characters).
_ADORNMENT_RE = re.compile(r"^([!-/:-@\[-`{-~])\1{2,}[ \t]*$")
# An underline of one or two characters, for titles that short ("if", "C#").
_SHORT_ADORNMENT_RE = re.compile(r"^([!-/:-@\[-`{-~])\1?[ \t]*$")
_DIRECTIVE_RE = re.compile(r"^\.\.[ \t]+([\w:+.-]+)[ \t]*::(?:[ \t]+(.*))?$")
_EXPLICIT_RE = re.compile(r"^[ \t]*\.\.(?:[ \t]|$)")
_FOOTNOTE_RE = re.compile(r"^\.\.[ \t]+\[[^\]]+\]")
_LIST_RE = re.compile(r"^[ \t]*(?:[-*+•‣⁃]|\(?(?:\d+|[a-zA-Z#]|[ivxlcdmIVXLCDM]+)[.)])(?:[ \t]+|$)")
_GRID_TABLE_RE = re.compile(r"^[ \t]*\+[-=+]+\+[ \t]*$")
_SIMPLE_TABLE_RE = re.compile(r"^[ \t]*=+(?:[ \t]+=+)+[ \t]*$")
# A cross-reference (":doc:`install`", ":ref:`usage <label>`", ":func:`open`") or a hyperlink
# reference ("`Bug tracker <https://...>`_", "`name`_", "`anonymous`__"): a list of nothing else is
# a menu.  Roles that format text instead of pointing somewhere (":code:", ":file:") are no links.
_NOT_LINK_ROLES = ("code", "math", "emphasis", "strong", "literal", "sub", "sup", "subscript", "superscript",
                   "title-reference", "t", "abbr", "kbd", "file", "samp", "command", "program", "dfn",
                   "guilabel", "menuselection", "mimetype", "regexp", "makevar")
_REFERENCE_RE = re.compile(
    rf"(?::(?!(?:{'|'.join(_NOT_LINK_ROLES)}):)[\w.+-]+(?::[\w.+-]+)?:`(?:[^`\\]|\\.)+`"
    r"|`(?:[^`\\]|\\.)+`__?)(?![\w`])")
_ITEM_MARKER_RE = re.compile(_LIST_RE.pattern, re.MULTILINE)
# Sphinx's file-wide metadata, a field list before the first title or paragraph (":orphan:").
_FILE_METADATA_RE = re.compile(r"^:(?:orphan|nocomments|nosearch|tocdepth):(?:[ \t].*)?$")


def _indent(line: str) -> int:
    return len(line.expandtabs(8)) - len(line.expandtabs(8).lstrip())


class _Reader(LineReader):
    """Walks the lines once, appending nodes to the current section."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.styles: list[tuple[str, bool]] = []  # adornment styles in order of first appearance

    def _before_content(self) -> bool:
        """No title and no leaf but markup read yet (where Sphinx reads file-wide metadata)."""
        return len(self.stack) == 1 and all(child.kind == MARKUP_KIND for child in self.root.children)

    def _line(self, index: int) -> str:
        return self.lines[index] if 0 <= index < len(self.lines) else ""

    def read(self) -> DraftNode:
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if _is_blank(line):
                self.i += 1
            elif _FILE_METADATA_RE.match(line) and self._before_content():
                self._markup(self.i, self.i + 1)
            elif self._title():
                continue
            elif _ADORNMENT_RE.match(line):
                self._markup(self.i, self.i + 1)  # a transition (or a stray rule)
            elif _GRID_TABLE_RE.match(line) or _SIMPLE_TABLE_RE.match(line):
                self._table()
            elif _EXPLICIT_RE.match(line):
                self._explicit()
            elif _LIST_RE.match(line):
                self._list_item()
            else:
                self._paragraph()
        self._trailing_markup()
        return self.root

    def _body_end(self, start: int, base: int) -> int:
        """Index just past the block at ``start``: its following lines indented deeper than
        ``base``, blank lines inside included, trailing blank lines not."""
        j = start + 1
        end = j
        while j < len(self.lines):
            if _is_blank(self.lines[j]):
                j += 1
                continue
            if _indent(self.lines[j]) <= base:
                break
            j += 1
            end = j
        return end

    # -- titles --------------------------------------------------------------------------
    def _title(self) -> bool:
        """Open a section if a title starts at the current line (after a blank line or at the start)."""
        i = self.i
        if i > 0 and not _is_blank(self.lines[i - 1]):
            return False
        line = self.lines[i]
        over = _ADORNMENT_RE.match(line)
        if over:
            text, under = self._line(i + 1), _ADORNMENT_RE.match(self._line(i + 2))
            if (under and under.group(1) == over.group(1) and text.strip()
                    and not _ADORNMENT_RE.match(text) and len(line.rstrip()) >= len(text.strip())):
                self._open(i, i + 3, text.strip(), (over.group(1), True))
                return True
            return False
        underline = self._line(i + 1).rstrip()
        under = _ADORNMENT_RE.match(underline) or (
            _SHORT_ADORNMENT_RE.match(underline) if len(line.strip()) <= 2 else None)
        # (a bullet or a doctest line over a rule is a list item or a doctest, not a title)
        if (under and _indent(line) == 0 and not _EXPLICIT_RE.match(line) and not _LIST_RE.match(line)
                and not line.startswith(">>>") and len(underline) >= min(len(line.rstrip()), 4)):
            self._open(i, i + 2, line.strip(), (under.group(1), False))
            return True
        return False

    def _open(self, start: int, stop: int, text: str, style: tuple[str, bool]) -> None:
        """A title's level is the order in which its adornment style first appeared."""
        if style not in self.styles:
            self.styles.append(style)
        self._heading(start, stop, self.styles.index(style) + 1, text)

    # -- blocks ---------------------------------------------------------------------------
    def _indented_block(self, kind: str, base: int | None = None, **fields: Any) -> None:
        """The current line and the lines indented deeper than ``base`` (default: the current line's indent)."""
        start = self.i
        self.i = self._body_end(start, _indent(self.lines[start]) if base is None else base)
        self._leaf(kind, start, self.i, **fields)

    def _list_item(self) -> None:
        """An item with its indented lines: a menu entry if it holds only references."""
        start = self.i
        self.i = self._body_end(start, _indent(self.lines[start]))
        text = "\n".join(self.lines[start:self.i])
        self._leaf(MENU_KIND if only_links(text, _REFERENCE_RE, _ITEM_MARKER_RE) else "item", start, self.i)

    def _explicit(self) -> None:
        """A directive, footnote, comment or hyperlink target (``..`` markup) with its indented body."""
        line = self.lines[self.i]
        directive = _DIRECTIVE_RE.match(line.strip())
        if directive:
            kind = directive_kind(directive.group(1))
            if kind == "code":
                language = (directive.group(2) or "").strip().split(" ")[0]
                self._indented_block("code", metadata={"language": language} if language else {})
            elif kind == "markup":
                self._markup(self.i, self._body_end(self.i, _indent(line)))
            else:
                self._indented_block("paragraph")
        elif _FOOTNOTE_RE.match(line.strip()):
            self._indented_block("paragraph")
        elif line.strip() == "..":
            # An empty comment ends the construct before it and takes no indented text after a
            # blank line (that is a block quote), only lines right below it.
            stop = self.i + 1
            while stop < len(self.lines) and not _is_blank(self.lines[stop]) and _indent(self.lines[stop]) > 0:
                stop += 1
            self._markup(self.i, stop)
        else:  # a comment or a hyperlink target
            self._markup(self.i, self._body_end(self.i, _indent(line)))

    def _table(self) -> None:
        start = self.i
        self.i += 1
        while self.i < len(self.lines) and not _is_blank(self.lines[self.i]):
            self.i += 1
            # a simple table's rows may be separated by blank lines; its last border ends it
            if (_SIMPLE_TABLE_RE.match(self.lines[start]) and self.i < len(self.lines)
                    and _is_blank(self.lines[self.i]) and not _SIMPLE_TABLE_RE.match(self.lines[self.i - 1])
                    and self._table_goes_on(self.i)):
                while self.i < len(self.lines) and _is_blank(self.lines[self.i]):
                    self.i += 1
        while _is_blank(self._line(self.i - 1)):
            self.i -= 1
        self._leaf("table", start, self.i)

    def _table_goes_on(self, blank: int) -> bool:
        """Whether a simple table's border comes after the blank line at ``blank`` with no
        title-like rule before it (an unclosed table must not swallow the sections after it)."""
        for line in self.lines[blank:]:
            if _SIMPLE_TABLE_RE.match(line):
                return True
            if _ADORNMENT_RE.match(line):
                return False
        return False

    def _paragraph(self) -> None:
        """Lines up to the next blank line; one ending in ``::`` introduces a literal block."""
        start = self.i
        base = _indent(self.lines[start])
        self.i += 1
        while self.i < len(self.lines) and not _is_blank(self.lines[self.i]):
            self.i += 1
        introduces_literal = self.lines[self.i - 1].rstrip().endswith("::")
        if self.i - start == 1 and self.lines[start].strip() == "::":
            self._markup(start, self.i)  # a lone "::" only introduces the literal block
        else:
            self._leaf("paragraph", start, self.i)
        if not introduces_literal:
            return
        j = self.i
        while j < len(self.lines) and _is_blank(self.lines[j]):
            j += 1
        if j < len(self.lines) and _indent(self.lines[j]) > base:
            self.i = j
            self._indented_block("code", base)


def parse_rst(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Build a section tree from reStructuredText.

    The document title is ``title`` if given, else the first title if no other
    title has its style (docutils promotes such a lone top-level title when
    nothing but comments comes before it; here badges or a lead-in before it
    do not matter, as for a Markdown H1); with several, it names only its own
    part (see :func:`hrag_pg.ingest.markdown.parse_markdown`).
    """
    reader = _Reader(text)
    root = reader.read()
    doc_title = title if title is not None else lone_title(reader.top_titles)
    root.title = doc_title
    return DocumentTree(source=source, root=root, title=doc_title, metadata={"strategy": "headings"})


__all__ = ["parse_rst"]
