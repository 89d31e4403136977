"""Legal and regulatory text → tree by clause numbering (the "clauses" strategy).

Work rules, policies, laws and contracts are organised by numbering, not by
typography: 第2章 > 第8条 > 8.1, or Chapter 2 > Article 8 > Section 8.1.  The
question "is the lunch allowance paid during probation?" hits one *item*;
the LLM needs the whole *article* (which also says when it is paid), so the
article is the parent and each numbered item a child.

Levels, outermost first:

1. chapter — 第N章, Chapter N (kind "chapter")
2. section — 第N節, Section N (kind "section")
3. article — 第N条 (第N条の M), Article N (kind "clause")
4. sub-article section — Section N.N (kind "section"), as in contracts where
   Article 5 contains Sections 5.1, 5.2
5. items — 1. １. １ (1) （1） ① 一 8.1 (kind "item", always leaves)

N may be arabic, full-width or kanji (第十二条).  Lines may carry Markdown
heading markers (``# 第4条：諸手当``), which are stripped from titles.  A
heading node's ``content`` is its heading line as written; the text between
the heading and the first item becomes a "paragraph" leaf; an item's content
is its original line(s), number included.  Other Markdown headings
(``## 附則``) become sections that close the open article.  Separators keep
the blank lines and indentation in between, so the root's full text is the
document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import TextCursor, add_child, close_sections, normalise_text

NUM = r"[0-9０-９〇零一二三四五六七八九十百千]+"
_AFTER_JA = r"(?=$|[\s　（(：:「【．.、])"
_AFTER_EN = r"(?=$|\s*[.:\-–—(（]|\s+[A-Z0-9\"'“(（])"
_MD_HEADING_RE = re.compile(r"^[ \t]{0,3}(#{1,6})[ \t]+")

_CHAPTER_JA = re.compile(rf"^第({NUM})章{_AFTER_JA}")
_SECTION_JA = re.compile(rf"^第({NUM})節{_AFTER_JA}")
_ARTICLE_JA = re.compile(rf"^第({NUM})条(?:の({NUM}))?{_AFTER_JA}")
_CHAPTER_EN = re.compile(rf"^(?:CHAPTER|Chapter)\s+(\d+|[IVXLCDM]+){_AFTER_EN}")
_ARTICLE_EN = re.compile(rf"^(?:ARTICLE|Article)\s+(\d+|[IVXLCDM]+){_AFTER_EN}")
_SECTION_EN = re.compile(rf"^(?:SECTION|Section|§)\s*(\d+(?:\.\d+)*){_AFTER_EN}")

_ITEM_RES = (
    re.compile(r"^\d+(?:\.\d+)+\.?(?=\s|$)"),  # 8.1 / 8.1.2
    re.compile(r"^[0-9０-９]{1,3}[.．)）](?![0-9０-９])"),  # 1.  １．  1)
    re.compile(
        r"^[(（](?:[0-9０-９]{1,3}|[一二三四五六七八九十]{1,3}|[a-zａ-ｚ]|[ア-ン])[)）]"
    ),  # (1) （1）
    re.compile(r"^[\u2460-\u2473\u3251-\u325f\u32b1-\u32bf]"),  # ① … ㊿
    re.compile(
        r"^(?:[0-9０-９]{1,3}|[一二三四五六七八九十]{1,3})(?=[ \t　])"
    ),  # １　 / 一　 (項, 号)
)

_FULLWIDTH = str.maketrans("０１２３４５６７８９", "0123456789")
_KANJI_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_KANJI_UNITS = {"十": 10, "百": 100, "千": 1000}


def numeral_value(text: str) -> int | None:
    """Value of an arabic, full-width or kanji numeral ("12", "１２", "十二", "二〇")."""
    text = text.translate(_FULLWIDTH)
    if text.isascii() and text.isdigit():
        return int(text)
    total = current = 0
    for char in text:
        if char in _KANJI_DIGITS:
            current = current * 10 + _KANJI_DIGITS[char]
        elif char in _KANJI_UNITS:
            total += (current or 1) * _KANJI_UNITS[char]
            current = 0
        else:
            return None
    return total + current


@dataclass(frozen=True)
class Heading:
    """A recognised structural line."""

    level: float
    kind: str
    key: str
    metadata: dict[str, object]


def classify_heading(line: str) -> Heading | None:
    """The structural heading ``line`` starts (Markdown ``#`` already stripped), if any."""
    if m := _CHAPTER_JA.match(line):
        n = numeral_value(m.group(1))
        return Heading(1, "chapter", f"第{n}章", {"number": n})
    if m := _SECTION_JA.match(line):
        n = numeral_value(m.group(1))
        return Heading(2, "section", f"第{n}節", {"number": n})
    if m := _ARTICLE_JA.match(line):
        n = numeral_value(m.group(1))
        key = f"第{n}条"
        meta: dict[str, object] = {"number": n}
        if m.group(2):
            branch = numeral_value(m.group(2))
            key += f"の{branch}"
            meta["branch"] = branch
        return Heading(3, "clause", key, meta)
    if m := _CHAPTER_EN.match(line):
        return Heading(1, "chapter", f"Chapter {m.group(1)}", {"number": m.group(1)})
    if m := _ARTICLE_EN.match(line):
        return Heading(3, "clause", f"Article {m.group(1)}", {"number": m.group(1)})
    if m := _SECTION_EN.match(line):
        number = m.group(1)
        level = 4 if "." in number else 2
        return Heading(level, "section", f"Section {number}", {"number": number})
    return None


def item_marker(line: str) -> str | None:
    """The item number ``line`` starts with ("1", "8.1", "(1)", "①"), if any."""
    for pattern in _ITEM_RES:
        if m := pattern.match(line):
            return m.group(0).rstrip(".．")
    return None


def looks_like_clauses(text: str) -> bool:
    """True if some line starts with 第N条 or Article N (used to pick the strategy)."""
    for raw in text.splitlines():
        line = _MD_HEADING_RE.sub("", raw).strip()
        if _ARTICLE_JA.match(line) or _ARTICLE_EN.match(line):
            return True
    return False


class _Builder:
    """Reads the lines once; headings open nodes, other lines gather into item/paragraph blocks."""

    def __init__(self, text: str) -> None:
        self.cursor = TextCursor(text)
        self.root = DraftNode(kind="document", content="")
        self.stack: list[tuple[float, DraftNode]] = [(0, self.root)]
        self.block: tuple[int, int] | None = None  # first and last line of the open block
        self.block_kind: str | None = None
        self.block_key: str | None = None
        self.first_h1: str | None = None

    def flush(self) -> None:
        if self.block_kind is not None and self.block is not None:
            first, last = self.block
            self.cursor.leaf(self.stack[-1][1], *self.cursor.lines_span(first, last + 1), self.block_kind,
                             lstrip=True, key=self.block_key)
        self.block, self.block_kind, self.block_key = None, None, None

    def _start_block(self, index: int, kind: str, key: str | None = None) -> None:
        self.flush()
        self.block, self.block_kind, self.block_key = (index, index), kind, key

    def _heading_node(self, index: int, kind: str, title: str, key: str | None,
                      metadata: dict[str, object] | None = None) -> DraftNode:
        """A node whose content is heading line ``index`` as written (Markdown markers included)."""
        taken = self.cursor.take(*self.cursor.lines_span(index, index + 1), lstrip=True)
        assert taken is not None  # heading lines are not blank
        separator, content = taken
        return DraftNode(kind, content=content, title=title, key=key, metadata=metadata or {},
                         separator=separator)

    def open(self, level: float, index: int, kind: str, title: str, key: str | None,
             metadata: dict[str, object] | None = None) -> None:
        self.flush()
        node = self._heading_node(index, kind, title, key, metadata)
        add_child(close_sections(self.stack, level), node)
        self.stack.append((level, node))

    def line(self, index: int, raw: str) -> None:
        md = _MD_HEADING_RE.match(raw)
        line = (raw[md.end() :] if md else raw).strip()
        if not line:
            if md is None:
                self.flush()  # blank line ends a paragraph or item
                return
            line = raw.strip()  # a bare "#": no heading, but its text is kept
            md = None
        if heading := classify_heading(line):
            self.open(heading.level, index, heading.kind, line, heading.key, dict(heading.metadata))
        elif md is not None:
            if len(md.group(1)) == 1 and self.first_h1 is None:
                self.first_h1 = line
            self.flush()
            if self.first_h1 == line and len(self.stack) == 1 and not self.root.children \
                    and not self.root.content:
                # The document's own title line is the root's text: it reads
                # first in node_text(root) without becoming a search target.
                root = self._heading_node(index, "document", line, None)
                self.root.content, self.root.separator = root.content, root.separator
            else:
                self.open(2.5, index, "section", line, line)
        elif marker := item_marker(line):
            self._start_block(index, "item", marker)
        elif self.block is not None:
            self.block = (self.block[0], index)  # continuation of the item or paragraph
        else:
            self._start_block(index, "paragraph")


def parse_clauses(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Build a chapter > (section) > article > item tree from legal text.

    The document title is ``title`` if given, else the first non-clause H1
    (``# 就業規則``).
    """
    builder = _Builder(normalise_text(text))
    for index, raw in enumerate(builder.cursor.text.split("\n")):
        builder.line(index, raw)
    builder.flush()
    root = builder.root
    doc_title = title if title is not None else builder.first_h1
    root.title = doc_title
    return DocumentTree(source=source, root=root, title=doc_title, metadata={"strategy": "clauses"})


__all__ = [
    "classify_heading",
    "item_marker",
    "looks_like_clauses",
    "numeral_value",
    "parse_clauses",
]
