"""Child splitters: refine the leaves a parent strategy produced.

Parents give the LLM context; children are what the vector search matches,
so children must be small (~150 tokens, one idea each).  Each splitter
replaces a leaf *in place* by several sibling leaves whose contents,
concatenated, are exactly the original text: nothing is lost and nothing is
stored twice.  The first piece keeps the leaf's ``separator``; the others
continue its text, so their separator is empty (pieces carry their own
trailing whitespace).  The overlap that keeps a term cut at a boundary searchable
lives in ``overlap_prefix``, which is embedded but not stored as content.

- :func:`split_paragraphs` — cap leaves at ``max_tokens`` (sentence, then
  word boundaries; line boundaries for code and tables).
- :func:`split_sentences` — groups of 1–3 sentences.
- :func:`extract_facts` — one "fact" leaf per sentence carrying a number or
  a requirement (金額, 日数, must/shall), the rest kept as remainder leaves.
- :func:`split_functions` — Python code blocks inside documents (Markdown
  fences, HTML ``<pre>``) cut into one "function" leaf per top-level
  ``def``/``class``.  (The code strategy already makes every function and
  method its own leaf, so for ``.py`` files this changes nothing.)
- :func:`add_qa_children` — questions from a pluggable generator as "qa"
  children of each leaf (the leaf becomes their parent: question → answer).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable
from typing import Protocol, runtime_checkable

from hrag_pg.ingest.tokens import DEFAULT_COUNTER, TokenCounter, count_joined, split_tokens, tail_tokens
from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree, DraftNode

#: Leaves that are prose, eligible for sentence-level splitting.
PROSE_KINDS = frozenset({"paragraph", "item", "sentence", "fact", "window"})
#: Leaves split at line boundaries rather than sentences (a menu: see hrag_pg.ingest.navigation).
LINE_KINDS = frozenset({"code", "function", "class", "table", "menu"})
#: Leaves no child splitter touches (markup is not embedded: no size to keep it under; the
#: parent limit leaves it whole too).
NEVER_SPLIT = frozenset({"qa", MARKUP_KIND})

_CLOSERS = r"」』）)\"'”’】］\]"
_SENTENCE_END_RE = re.compile(rf"[。！？]+[{_CLOSERS}]*|[.!?]+[{_CLOSERS}]*(?=\s|$)")
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "etc",
        "vs",
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "fig",
        "figs",
        "cf",
        "approx",
        "inc",
        "ltd",
        "corp",
        "jr",
        "sr",
        "pp",
        "vol",
    ]
)
_TRAILING_SPACE_RE = re.compile(r"\s*")
_BLANK_LINES_RE = re.compile(r"\n[ \t]*\n\s*")

_NUMBER_RE = re.compile(
    r"[0-9０-９]|[〇一二三四五六七八九十百千万億]+(?:円|日|か月|ヶ月|カ月|箇月|年|時間|分|人|回|件|桁|割|%|％)"
)
_REQUIREMENT_RE = re.compile(
    r"\b(?:must|shall|required|requires|mandatory|prohibited|forbidden|may not|at least|at most|"
    r"no later than|within)\b|しなければならない|してはならない|ならない|義務|必須|禁止|必要|以上|以下|以内|までに",
    re.IGNORECASE,
)


def _is_sentence_end(text: str, match: re.Match[str]) -> bool:
    """False for periods that end an abbreviation, an initial or a list number."""
    if match.group()[0] in "。！？!?":
        return True
    line_start = text.rfind("\n", 0, match.start()) + 1
    word_start = (
        max(text.rfind(" ", 0, match.start()), text.rfind("\t", 0, match.start()), line_start - 1)
        + 1
    )
    word = text[word_start : match.start()].lstrip("(（「\"'“")
    if word.lower() in _ABBREVIATIONS:
        return False
    if len(word) == 1 and word.isalpha() and word.isupper():
        return False  # "J. Smith"
    # "1. " is an enumerator at the start of a line, not the end of a sentence.
    return not (word.isdigit() and not text[line_start:word_start].strip())


def sentence_spans(text: str) -> list[str]:
    """Sentences of ``text`` with their trailing whitespace; ``"".join(...) == text``.

    Ends: Japanese 。！？ (and closing brackets after them) anywhere; English
    ``. ! ?`` only when followed by whitespace or the end, so decimals (3.5)
    and "e.g." do not end a sentence; and a blank line: a docstring's or a
    list item's paragraphs are not one sentence.  Not a blank line after a
    colon, though: a lead-in ("For example:", "Decoding JSON::") stays with
    what it introduces.
    """
    pieces: list[str] = []
    start = 0
    for blank in _BLANK_LINES_RE.finditer(text):
        line_start = text.rfind("\n", 0, blank.start()) + 1  # the line before the blank, not all text so far
        if text[line_start : blank.start()].rstrip().endswith(":"):
            continue
        pieces.extend(_block_sentences(text[start : blank.end()]))
        start = blank.end()
    pieces.extend(_block_sentences(text[start:]))
    return pieces


def _block_sentences(text: str) -> list[str]:
    """Sentences of a block without blank lines (see :func:`sentence_spans`)."""
    pieces: list[str] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        if not _is_sentence_end(text, match):
            continue
        end = match.end()
        end += _TRAILING_SPACE_RE.match(text, end).end() - end  # type: ignore[union-attr]
        if text[start:end].strip():
            pieces.append(text[start:end])
            start = end
    if start < len(text):
        if text[start:].strip() or not pieces:
            pieces.append(text[start:])
        else:
            pieces[-1] += text[start:]
    return pieces


def _line_spans(text: str) -> list[str]:
    return text.splitlines(keepends=True) or [text]


def split_text(
    text: str,
    max_tokens: int,
    counter: TokenCounter = DEFAULT_COUNTER,
    *,
    by_lines: bool = False,
) -> list[str]:
    """Pieces of at most ``max_tokens`` whose concatenation is ``text``.

    Whole sentences (or lines, for code) are packed greedily; a sentence
    longer than the budget is cut between its lines if it has several (the
    ``>>>`` lines of a docstring's example, the lines of a nested list), and
    a line longer than the budget between words (:func:`split_tokens`).
    """
    if counter.count(text) <= max_tokens:
        return [text]
    parts = _line_spans(text) if by_lines else sentence_spans(text)
    prime = getattr(counter, "prime", None)
    if prime is not None:  # one batch call for the parts, asked for one by one below
        prime(parts)
    pieces: list[str] = []
    current = ""
    current_tokens = 0
    for part in parts:
        part_tokens = counter.count(part)
        if part_tokens > max_tokens:
            if current:
                pieces.append(current)
            if not by_lines and "\n" in part.strip():
                *whole, current = split_text(part, max_tokens, counter, by_lines=True)
            else:
                *whole, current = split_tokens(part, max_tokens, counter)
            pieces.extend(whole)
            current_tokens = counter.count(current)
            continue
        joined = count_joined(counter, current, part, current_tokens) if current else part_tokens
        if current and joined > max_tokens:
            pieces.append(current)
            current, current_tokens = part, part_tokens
        else:
            current, current_tokens = current + part, joined
    if current:
        pieces.append(current)
    # A whitespace-only tail (possible after a line split) joins the previous piece.
    merged: list[str] = []
    for piece in pieces:
        if merged and not piece.strip():
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def _replace_leaves(
    tree: DocumentTree, replace: Callable[[DraftNode], list[DraftNode] | None]
) -> DocumentTree:
    """Apply ``replace`` to every leaf; None keeps the leaf as is."""
    for node, _ in list(tree.root.walk()):
        if node.is_leaf:
            continue
        new_children: list[DraftNode] = []
        for child in node.children:
            replacement = replace(child) if child.is_leaf else None
            if replacement is None:
                new_children.append(child)
            else:
                new_children.extend(replacement)
        node.children = new_children
    return tree


def pieces_as_leaves(
    leaf: DraftNode,
    pieces: list[str],
    *,
    kinds: Iterable[str] | None = None,
    overlap_tokens: int = 0,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> list[DraftNode]:
    """Sibling leaves replacing ``leaf``: same title, keys "#1"…, part numbers in metadata.

    ``pieces`` must concatenate to ``leaf.content``: the first piece takes the
    leaf's separator, each later one continues it (separator ``""``).
    """
    kinds = list(kinds) if kinds is not None else [leaf.kind] * len(pieces)
    nodes: list[DraftNode] = []
    for i, (piece, kind) in enumerate(zip(pieces, kinds, strict=True), start=1):
        metadata = {**leaf.metadata, "part": i, "parts": len(pieces)}
        if kind != leaf.kind:
            metadata["source_kind"] = leaf.kind
        overlap = leaf.overlap_prefix if i == 1 else tail_tokens(pieces[i - 2], overlap_tokens, counter)
        nodes.append(
            DraftNode(
                kind=kind,
                content=piece,
                title=leaf.title,
                metadata=metadata,
                overlap_prefix=overlap,
                key=f"{leaf.key}#{i}" if leaf.key is not None else None,
                separator=leaf.separator if i == 1 else "",
            )
        )
    return nodes


def split_paragraphs(
    tree: DocumentTree,
    *,
    max_tokens: int = 150,
    overlap_tokens: int = 25,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> DocumentTree:
    """Replace every leaf longer than ``max_tokens`` by sibling pieces within it.

    Pieces keep the leaf's kind and title; keys get "#1", "#2"…; each piece
    after the first carries the last ~``overlap_tokens`` tokens of the
    previous piece (whole words / CJK characters) as ``overlap_prefix``.
    Code, functions and tables are cut between lines.  Mutates and returns
    ``tree``.
    """
    if max_tokens < 1 or overlap_tokens < 0:
        raise ValueError("max_tokens must be >= 1 and overlap_tokens >= 0")

    def replace(leaf: DraftNode) -> list[DraftNode] | None:
        if leaf.kind in NEVER_SPLIT or counter.count(leaf.content) <= max_tokens:
            return None
        pieces = split_text(leaf.content, max_tokens, counter, by_lines=leaf.kind in LINE_KINDS)
        if len(pieces) < 2:
            return None
        return pieces_as_leaves(leaf, pieces, overlap_tokens=overlap_tokens, counter=counter)

    return _replace_leaves(tree, replace)


def split_sentences(
    tree: DocumentTree,
    *,
    group: int = 3,
    overlap_tokens: int = 0,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> DocumentTree:
    """Turn prose leaves into "sentence" leaves of ``group`` (1–3) sentences each.

    The leaf's original kind is kept in ``metadata["source_kind"]``; code and
    tables are left alone.  Mutates and returns ``tree``.
    """
    if group < 1:
        raise ValueError("group must be at least 1 sentence")

    def replace(leaf: DraftNode) -> list[DraftNode] | None:
        if leaf.kind not in PROSE_KINDS:
            return None
        sentences = sentence_spans(leaf.content)
        groups = ["".join(sentences[i : i + group]) for i in range(0, len(sentences), group)]
        return pieces_as_leaves(
            leaf,
            groups,
            kinds=["sentence"] * len(groups),
            overlap_tokens=overlap_tokens,
            counter=counter,
        )

    return _replace_leaves(tree, replace)


def is_fact(sentence: str) -> bool:
    """A sentence stating a number, amount, period or requirement."""
    return bool(_NUMBER_RE.search(sentence) or _REQUIREMENT_RE.search(sentence))


def extract_facts(tree: DocumentTree) -> DocumentTree:
    """Split multi-sentence prose leaves into "fact" leaves and remainder leaves.

    Each sentence with a number or a requirement becomes its own "fact" leaf
    (one fact per child, so "20,000円" is matched by a child about exactly
    that); consecutive other sentences stay together in a leaf of the
    original kind.  Order is kept and no text is lost.  Mutates and returns
    ``tree``.
    """

    def replace(leaf: DraftNode) -> list[DraftNode] | None:
        if leaf.kind not in PROSE_KINDS or leaf.kind == "fact":
            return None
        sentences = sentence_spans(leaf.content)
        flags = [is_fact(sentence) for sentence in sentences]
        if len(sentences) < 2 or not any(flags):
            return None
        pieces: list[str] = []
        kinds: list[str] = []
        for sentence, fact in zip(sentences, flags, strict=True):
            if not fact and kinds and kinds[-1] != "fact":
                pieces[-1] += sentence
            else:
                pieces.append(sentence)
                kinds.append("fact" if fact else leaf.kind)
        return pieces_as_leaves(leaf, pieces, kinds=kinds)

    return _replace_leaves(tree, replace)


#: Fence languages read as Python by :func:`split_functions` (a block without a language counts too).
PYTHON_LANGUAGES = frozenset({"python", "py", "python3", "py3"})
_TOP_LEVEL_DEF_RE = re.compile(r"(?:async[ \t]+def|def|class)[ \t]+\w")


def function_pieces(code: str) -> list[tuple[str, bool]]:
    """Cut ``code`` before every top-level ``def``/``class`` (with its decorators and comments above).

    Returns (piece, is_definition) pairs whose pieces concatenate to ``code``.
    """
    lines = code.split("\n")
    starts: list[int] = []
    for i, line in enumerate(lines):
        if not _TOP_LEVEL_DEF_RE.match(line):
            continue
        start = i
        while start > 0 and lines[start - 1][:1] in ("@", "#"):
            start -= 1  # decorators and comment lines directly above belong to the definition
        if not starts or start > starts[-1]:
            starts.append(start)
    if not starts:
        return [(code, False)]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    cuts = [0, *(offsets[s] for s in starts if s > 0), len(code)]
    pieces: list[tuple[str, bool]] = []
    for begin, end in itertools.pairwise(cuts):
        piece = code[begin:end]
        if piece:
            pieces.append((piece, begin in {offsets[s] for s in starts}))
    return pieces


def split_functions(tree: DocumentTree) -> DocumentTree:
    """Cut Python code leaves into one "function" leaf per top-level definition.

    A fenced block or ``<pre>`` (kind "code") whose language is Python or
    not given is cut before each top-level ``def``/``async def``/``class``
    line, keeping the decorators and comment lines directly above it; the
    pieces are "function" leaves (``metadata["source_kind"] = "code"``),
    the code before the first definition stays "code".  Nothing is lost:
    the pieces concatenate to the block.  Mutates and returns ``tree``.
    """

    def replace(leaf: DraftNode) -> list[DraftNode] | None:
        if leaf.kind != "code" or str(leaf.metadata.get("language", "python")).lower() not in PYTHON_LANGUAGES:
            return None
        pieces = function_pieces(leaf.content)
        if not any(is_def for _, is_def in pieces) or len(pieces) < 2:
            return None
        return pieces_as_leaves(leaf, [piece for piece, _ in pieces],
                                kinds=["function" if is_def else "code" for _, is_def in pieces])

    return _replace_leaves(tree, replace)


@runtime_checkable
class QuestionGenerator(Protocol):
    """Writes questions a passage answers (an LLM, a template, a human list)."""

    def questions(self, text: str) -> list[str]: ...


def add_qa_children(tree: DocumentTree, generator: QuestionGenerator) -> DocumentTree:
    """Give every leaf "qa" children whose content is a generated question.

    The searched child is then the question, the returned parent the passage
    that answers it.  Blank and repeated questions are dropped; the leaf is
    unchanged if the generator returns none.  Mutates and returns ``tree``.
    """
    for leaf in tree.root.leaves():
        if leaf.kind in ("qa", MARKUP_KIND):
            continue
        seen: set[str] = set()
        for question in generator.questions(leaf.content):
            question = question.strip()
            if not question or question in seen:
                continue
            seen.add(question)
            leaf.children.append(
                DraftNode(
                    kind="qa", content=question, key=f"qa:{len(seen)}", metadata={"generated": True}
                )
            )
    return tree


__all__ = [
    "LINE_KINDS",
    "PROSE_KINDS",
    "QuestionGenerator",
    "add_qa_children",
    "extract_facts",
    "is_fact",
    "pieces_as_leaves",
    "sentence_spans",
    "split_functions",
    "split_paragraphs",
    "split_sentences",
    "split_text",
]
