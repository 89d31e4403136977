"""Token counting and token-bounded text cutting.

Chunk sizes (150-token children, 3,000-token parents, 1,200-token windows) are
budgets in *model* tokens, so the real tokenizer is used when one is loaded
(:class:`TokenizerCounter`).  Unit tests and ingestion without a model use
:class:`ApproximateTokenCounter`, whose rule is simple enough to reason about.

Cuts are made between *units*: a whitespace-delimited word, or a single CJK
character (Japanese and Chinese have no spaces, and one character is roughly
one token).  A cut therefore never lands in the middle of a word.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

#: Han, Hiragana, Katakana, Hangul, CJK punctuation and full-width forms.
CJK_CHARS = (
    "\u2e80-\u2fff"  # CJK radicals, Kangxi
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u31ff"  # Bopomofo, Katakana extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # Half-width and full-width forms
    "\U00020000-\U0002fa1f"  # CJK extensions B-F, compatibility supplement
)
_CJK_RE = re.compile(f"[{CJK_CHARS}]")
#: One unit: a single CJK character, or a run of non-space, non-CJK characters.
_UNIT_RE = re.compile(f"[{CJK_CHARS}]|[^\\s{CJK_CHARS}]+")


@runtime_checkable
class TokenCounter(Protocol):
    """Anything that can say how many tokens a text is."""

    def count(self, text: str) -> int: ...


class ApproximateTokenCounter:
    """Model-free estimate, used when no tokenizer is loaded.

    Rule: every CJK character (Han, Hiragana, Katakana, Hangul, CJK
    punctuation, full-width forms) counts as 1 token; the remaining text
    counts ``ceil(1.3 × number of whitespace-separated words)`` tokens (the
    usual ratio of WordPiece/BPE tokens to English words).  Whitespace alone
    counts 0.  The estimate errs slightly high for plain English, which is the
    safe direction for size limits.
    """

    words_factor: float = 1.3

    def count(self, text: str) -> int:
        cjk = len(_CJK_RE.findall(text))
        words = len(_CJK_RE.sub(" ", text).split())
        return cjk + math.ceil(self.words_factor * words)


#: Whitespace that every tokenizer :func:`splits_at_whitespace` accepts drops between tokens:
#: BERT's own definition (space, tab, newline, carriage return, Unicode Zs), not Python's
#: ``str.isspace``, which includes the form feed that BERT's normalizer deletes ("a\fb" is one word).
_SPLIT_WHITESPACE = " \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_WORD_RUN_RE = re.compile(f"[^{_SPLIT_WHITESPACE}]+")
_SPLITTING_PRE_TOKENIZERS = {"BertPreTokenizer", "Whitespace", "WhitespaceSplit"}
_CHARWISE_NORMALIZERS = {None, "BertNormalizer", "Lowercase"}


def splits_at_whitespace(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` tokenizes each whitespace-separated run alone and emits nothing for whitespace.

    Then a text's count is the sum of its runs' counts, so the splitters can
    add counts they already have instead of encoding every candidate piece
    again (hundreds of tokenizer calls for a long section).  Decided from the
    fast tokenizer's own description: a WordPiece model behind a
    whitespace-splitting pre-tokenizer and a character-wise normalizer (the
    bundled MiniLM and every BERT-style model).  Anything else (SentencePiece,
    byte-level BPE, a slow tokenizer) is counted text by text, as before.
    """
    backend = getattr(tokenizer, "_tokenizer", None) or getattr(tokenizer, "backend_tokenizer", None)
    to_str = getattr(backend, "to_str", None)
    if to_str is None:
        return False
    try:
        described = json.loads(to_str())
    except (TypeError, ValueError):
        return False

    def kind(part: str) -> str | None:
        value = described.get(part)
        return value.get("type") if isinstance(value, dict) else None

    return (kind("model") == "WordPiece"
            and kind("pre_tokenizer") in _SPLITTING_PRE_TOKENIZERS
            and kind("normalizer") in _CHARWISE_NORMALIZERS)


class TokenizerCounter:
    """Exact counts from a HuggingFace tokenizer (special tokens excluded)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        #: see :func:`splits_at_whitespace` (read by :func:`count_range`)
        self.splits_at_whitespace = splits_at_whitespace(tokenizer)

    def count(self, text: str) -> int:
        try:
            # verbose=False: counting a long parent is fine, the model never reads it whole,
            # so HF's "sequence longer than the maximum" warning would only be noise.
            return len(self.tokenizer.encode(text, add_special_tokens=False, verbose=False))
        except TypeError:  # a tokenizer without the verbose flag
            return len(self.tokenizer.encode(text, add_special_tokens=False))

    def count_many(self, texts: list[str]) -> list[int]:
        """The counts of many texts, in one batch call where the tokenizer has one (else one by one)."""
        encode_batch = getattr(self.tokenizer, "encode_batch", None)
        if encode_batch is None:
            return [self.count(text) for text in texts]
        return [len(ids) for ids in encode_batch(texts, add_special_tokens=False)]


class CachedCounter:
    """Remembers counts by text for one document's preparation.

    The child splitter, the parent limit, the grouping and flatten all count
    the same leaves again (and parents' texts contain their leaves), so the
    tokenizer would otherwise run several times over every paragraph.
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._counts: dict[str, int] = {}
        self.splits_at_whitespace = bool(getattr(counter, "splits_at_whitespace", False))

    def count(self, text: str) -> int:
        found = self._counts.get(text)
        if found is None:
            found = self._counts[text] = self.counter.count(text)
        return found

    def prime(self, texts: Iterable[str]) -> None:
        """Count ahead, in one batch, texts that will be asked for one at a time.

        Re-ingesting an edited file spends most of its time preparing the
        file, and most of that in hundreds of single tokenizer calls; one
        batch call over the same texts gives the same counts in about half the
        time.  Counters without a batch call are left to count lazily.
        """
        count_many = getattr(self.counter, "count_many", None)
        if count_many is None:
            return
        missing = [text for text in dict.fromkeys(texts) if text not in self._counts]
        if missing:
            self._counts.update(zip(missing, count_many(missing), strict=True))


DEFAULT_COUNTER: TokenCounter = ApproximateTokenCounter()


def _prime(counter: TokenCounter, texts: Iterable[str]) -> None:
    prime = getattr(counter, "prime", None)
    if prime is not None:
        prime(texts)


class RangeCounter:
    """Token counts of slices of one text, for splitters that try many cuts of it.

    With a tokenizer that :func:`splits_at_whitespace`, a slice's count is
    the sum of the counts of the whitespace-separated runs inside it (counted
    once, in one batch) plus the partial runs at its two ends; otherwise
    every slice is encoded, as a plain ``counter.count`` would.  The counts
    are the same either way.
    """

    def __init__(self, text: str, counter: TokenCounter) -> None:
        self.text = text
        self.counter = counter
        self.runs: list[tuple[int, int]] = []
        self.before: list[int] = [0]  # before[i]: tokens of runs[:i]
        if getattr(counter, "splits_at_whitespace", False):
            self.runs = [match.span() for match in _WORD_RUN_RE.finditer(text)]
            words = [text[a:b] for a, b in self.runs]
            _prime(counter, words)
            for word in words:
                self.before.append(self.before[-1] + counter.count(word))
        self._starts = [a for a, _ in self.runs]
        self._ends = [b for _, b in self.runs]

    def count(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]``."""
        if not self.runs:
            return self.counter.count(self.text[start:end])
        first = bisect.bisect_left(self._starts, start)  # first run starting at or after start
        last = bisect.bisect_right(self._ends, end)  # runs before this one end at or before end
        if first >= last:  # no whole run inside: the slice is (part of) one or two runs
            return self.counter.count(self.text[start:end])
        tokens = self.before[last] - self.before[first]
        if start < self._starts[first]:  # the slice starts inside the run before
            tokens += self.counter.count(self.text[start:self._starts[first]])
        if last < len(self.runs) and self._starts[last] < end:  # it ends inside the run after
            tokens += self.counter.count(self.text[self._starts[last]:end])
        return tokens


def count_joined(counter: TokenCounter, left: str, right: str, left_tokens: int | None = None) -> int:
    """Tokens of ``left + right`` (``left_tokens``: ``left``'s count, if known).

    Added up when whitespace between them separates their tokens (see
    :func:`splits_at_whitespace`), so a splitter growing a piece part by part
    does not encode the whole piece again at every step.
    """
    if (left and right and getattr(counter, "splits_at_whitespace", False)
            and (_WORD_RUN_RE.fullmatch(left[-1]) is None or _WORD_RUN_RE.fullmatch(right[0]) is None)):
        return (counter.count(left) if left_tokens is None else left_tokens) + counter.count(right)
    return counter.count(left + right)


def count_parts(counter: TokenCounter, parts: Iterable[str]) -> int:
    """Tokens of ``"".join(parts)``: counted block by block where whitespace separates the blocks' tokens.

    A section's full text is its paragraphs joined by blank lines; with a
    tokenizer that :func:`splits_at_whitespace` its count is the sum of the
    paragraphs' counts, already known, instead of one more encoding of the
    whole section.  Parts joined without whitespace are counted together.
    """
    parts = [part for part in parts if part]
    if not getattr(counter, "splits_at_whitespace", False):
        return counter.count("".join(parts))
    tokens = 0
    block: list[str] = []
    for part in parts:
        if block and (_WORD_RUN_RE.fullmatch(block[-1][-1]) is None or _WORD_RUN_RE.fullmatch(part[0]) is None):
            tokens += counter.count("".join(block))
            block = []
        block.append(part)
    if block:
        tokens += counter.count("".join(block))
    return tokens


def unit_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every unit (word or CJK character) in ``text``."""
    return [match.span() for match in _UNIT_RE.finditer(text)]


def split_tokens(text: str, max_tokens: int, counter: TokenCounter = DEFAULT_COUNTER) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_tokens`` at unit boundaries.

    Concatenating the pieces gives back ``text`` exactly (whitespace between
    units stays at the end of the earlier piece).  A single unit larger than
    the budget (a very long word under a real tokenizer) is cut by characters,
    the only case where a word is broken.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if counter.count(text) <= max_tokens:
        return [text]
    spans = unit_spans(text)
    ranges = RangeCounter(text, counter)
    pieces: list[str] = []
    start = 0  # text offset where the current piece starts
    i = 0  # first unit of the current piece
    while i < len(spans):
        # Largest j such that units i..j-1 fit; binary search keeps this O(n log n) counts.
        lo, hi = i + 1, len(spans)
        if ranges.count(start, spans[i][1]) > max_tokens:
            pieces.extend(_split_chars(text[start : spans[i][1]], max_tokens, counter))
            start, i = spans[i][1], i + 1
            continue
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ranges.count(start, spans[mid - 1][1]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        end = spans[lo][0] if lo < len(spans) else len(text)
        pieces.append(text[start:end])
        start, i = end, lo
    if start < len(text):  # only whitespace is left after the last cut
        pieces[-1] += text[start:]
    return pieces


def _split_chars(text: str, max_tokens: int, counter: TokenCounter) -> list[str]:
    pieces: list[str] = []
    current = ""
    for char in text:
        if current and counter.count(current + char) > max_tokens:
            pieces.append(current)
            current = ""
        current += char
    if current:
        pieces.append(current)
    return pieces


def tail_tokens(text: str, max_tokens: int, counter: TokenCounter = DEFAULT_COUNTER) -> str:
    """The longest suffix of whole units of ``text`` within ``max_tokens``.

    Used for overlap: the end of the previous chunk, never starting mid-word.
    """
    if max_tokens <= 0:
        return ""
    spans = unit_spans(text)
    ranges = RangeCounter(text, counter)
    best = ""
    lo, hi = 0, len(spans)  # number of trailing units taken
    while lo < hi:
        mid = (lo + hi + 1) // 2
        first = spans[len(spans) - mid][0]
        candidate = text[first:].rstrip()
        if ranges.count(first, first + len(candidate)) <= max_tokens:
            lo, best = mid, candidate
        else:
            hi = mid - 1
    return best
