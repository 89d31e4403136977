"""Headings of plain text: numbered lines and short title lines that stand alone.

A ``.txt`` manual, a README or a NEWS file is read as Markdown, and most have
no Markdown headings at all: libpng's manual marks its chapters "III.
Reading" and its sections "Setup", each a line of its own between blank
lines.  Read as Markdown that is one flat document cut into parts by size,
with every paragraph's heading path empty.  So when a plain-text document
has no Markdown heading (no ``#`` line, no ``===``/``---`` underline), a
line that stands alone between blank lines and is

* numbered (``III. Reading``, ``2.1 Scope``): a heading of the level its
  number says (a Roman numeral or one number is 1, ``2.1`` is 2), or
* a title (one to six words, a capital first, no closing punctuation, not
  ending in a word like "the" or "are"): a heading one level below the last
  numbered one (1 if there is none)

opens a section.  The line is kept as written, so the text round-trips.  A
run of such lines with nothing else between them (a table of contents,
numbered steps of one line each) stays text: a heading needs a paragraph
after it, or a deeper numbered heading.  A single letter is a Roman numeral
only where it continues the Roman numbering ("V." after "IV."); elsewhere
("C." after "B.") it is a letter and its line a title.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROMAN_RE = re.compile(r"^(?P<number>[IVXLC]{1,6})\.[ \t]+(?P<title>[A-Z].*)$")
_DECIMAL_RE = re.compile(r"^(?P<number>\d{1,2}(?:\.\d{1,2}){0,3})\.?[ \t]+(?P<title>[A-Z].*)$")
_TITLE_RE = re.compile(r"^[A-Z]\S*(?:[ \t]+\S+){0,5}$")
#: A line ending like this is a sentence, a lead-in or a list, not a heading.
_CLOSING = (".", ",", ";", ":", "!", "?", "\\")
#: ... and so is one whose last word is one of these ("Choices for the alpha_mode are").
_OPEN_ENDINGS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "of", "on", "or", "that",
    "the", "to", "was", "were", "which", "with",
})
#: Characters of code, markup or tables, never of a heading line.
_NOT_IN_HEADINGS = frozenset("{}=<>;|*`#")
_MAX_HEADING_CHARS = 80
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100}


def _roman(numeral: str) -> int:
    total = 0
    for i, letter in enumerate(numeral):
        value = _ROMAN_VALUES[letter]
        following = _ROMAN_VALUES[numeral[i + 1]] if i + 1 < len(numeral) else 0
        total += -value if value < following else value
    return total


@dataclass
class _Candidate:
    text: str
    depth: int | None  # the number's depth; None for a title line
    roman: int | None = None  # the Roman numeral's value


def _candidate(line: str, last_roman: int) -> _Candidate | None:
    """The line as a possible heading, or None if it cannot be one."""
    if not line or line[0].isspace() or len(line) > _MAX_HEADING_CHARS:
        return None
    text = line.rstrip()
    if text.endswith(_CLOSING) or "://" in text or not _NOT_IN_HEADINGS.isdisjoint(text):
        return None
    roman = _ROMAN_RE.match(text)
    if roman:
        value = _roman(roman.group("number"))
        if len(roman.group("number")) > 1 or value == last_roman + 1:
            return _Candidate(text, 1, value)
    decimal = _DECIMAL_RE.match(text)
    if decimal:
        return _Candidate(text, len(decimal.group("number").split(".")))
    if _TITLE_RE.match(text) and text.split()[-1].lower() not in _OPEN_ENDINGS:
        return _Candidate(text, None)
    return None


class PlainHeadings:
    """Finds the headings of one plain-text document, in reading order (it keeps the numbering)."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.numbered_level = 0  # level of the last numbered heading
        self.last_roman = 0

    def at(self, i: int) -> tuple[int, str] | None:
        """(level, text) if the line ``i`` a block starts at is a heading, else None."""
        lines = self.lines
        if (i and lines[i - 1].strip()) or i + 1 >= len(lines) or lines[i + 1].strip():
            return None
        this = _candidate(lines[i], self.last_roman)
        if this is None:
            return None
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines):
            return None  # nothing after it to head
        standing_alone = j + 1 >= len(lines) or not lines[j + 1].strip()
        after = _candidate(lines[j], this.roman or self.last_roman) if standing_alone else None
        if after is not None and (this.depth is None or after.depth is None or after.depth <= this.depth):
            return None  # a run of heading-like lines: a table of contents, one-line steps
        if this.depth is None:
            return self.numbered_level + 1, this.text
        self.numbered_level = this.depth
        if this.roman is not None:
            self.last_roman = this.roman
        return this.depth, this.text


__all__ = ["PlainHeadings"]
