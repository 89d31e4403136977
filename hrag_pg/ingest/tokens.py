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


class TokenizerCounter:
    """Exact counts from a HuggingFace tokenizer (special tokens excluded)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

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
    pieces: list[str] = []
    start = 0  # text offset where the current piece starts
    i = 0  # first unit of the current piece
    while i < len(spans):
        # Largest j such that units i..j-1 fit; binary search keeps this O(n log n) counts.
        lo, hi = i + 1, len(spans)
        if counter.count(text[start : spans[i][1]]) > max_tokens:
            pieces.extend(_split_chars(text[start : spans[i][1]], max_tokens, counter))
            start, i = spans[i][1], i + 1
            continue
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if counter.count(text[start : spans[mid - 1][1]]) <= max_tokens:
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
    best = ""
    lo, hi = 0, len(spans)  # number of trailing units taken
    while lo < hi:
        mid = (lo + hi + 1) // 2
        candidate = text[spans[len(spans) - mid][0] :].rstrip()
        if counter.count(candidate) <= max_tokens:
            lo, best = mid, candidate
        else:
            hi = mid - 1
    return best
