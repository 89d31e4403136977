"""Counts added up at whitespace are exactly the tokenizer's counts of the whole text.

The splitters (paragraph pieces, overlaps, the parent limit) try many cuts of
one text; with a tokenizer that splits at whitespace they add the counts of
the whitespace-separated runs instead of encoding every candidate again
(preparing the PostgreSQL manual: 54 s -> 20 s, every tree identical).  Token
counts go into content hashes and sizes, so an added-up count that differs
from the real one by a single token would change trees and re-embed stored
documents: these tests compare them with the tokenizer on texts made to break
the rule (form feeds, which BERT deletes and so joins the words around them;
no-break and ideographic spaces; kana runs; words cut mid-way).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hrag_pg import embedding
from hrag_pg.embedders import sentence_transformers as st_backend
from hrag_pg.ingest.children import split_text
from hrag_pg.ingest.tokens import (
    ApproximateTokenCounter,
    CachedCounter,
    RangeCounter,
    TokenizerCounter,
    count_joined,
    count_parts,
    split_tokens,
    splits_at_whitespace,
    tail_tokens,
    unit_spans,
)

pytestmark = pytest.mark.model

TOKENIZER = st_backend.load_tokenizer(embedding.default_model_path())
EXACT = TokenizerCounter(TOKENIZER)

# Words and separators chosen to meet every case of the rule: words BERT splits itself
# (punctuation, CJK ideographs), kana runs it does not, and "whitespace" BERT does not drop.
pieces = st.sampled_from([
    "alpha", "beta.", "b-tree", "pg_stat_activity", "(x)", "naïve", "ＡＢＣ", "試用期間", "カタカナ", "です",
    "통근", "20,000円", "e.g.", "'", "https://example.com/a?b=c",
    " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u00a0", "\u3000", "\u2003", "\x0c", "\x0b", "\u200b", "\u2028", "\x85",
])
texts = st.lists(pieces, min_size=1, max_size=40).map("".join)
EXAMPLES = settings(max_examples=300, deadline=None, derandomize=True)


def test_the_bundled_tokenizer_splits_at_whitespace_and_the_estimate_does_not() -> None:
    assert splits_at_whitespace(TOKENIZER)
    assert EXACT.splits_at_whitespace and CachedCounter(EXACT).splits_at_whitespace
    assert not getattr(ApproximateTokenCounter(), "splits_at_whitespace", False)  # ceil(1.3 x words) is not additive
    assert not splits_at_whitespace(object())


@EXAMPLES
@given(left=texts, right=texts)
def test_a_joined_count_is_the_count_of_the_joined_text(left: str, right: str) -> None:
    cached = CachedCounter(EXACT)
    assert count_joined(cached, left, right) == EXACT.count(left + right)
    assert count_joined(cached, left, right, EXACT.count(left)) == EXACT.count(left + right)


@EXAMPLES
@given(parts=st.lists(texts, max_size=8))
def test_the_count_of_parts_is_the_count_of_their_join(parts: list[str]) -> None:
    assert count_parts(CachedCounter(EXACT), parts) == EXACT.count("".join(parts))


@EXAMPLES
@given(text=texts, data=st.data())
def test_a_range_count_is_the_count_of_the_slice(text: str, data: st.DataObject) -> None:
    spans = unit_spans(text)
    if not spans:
        return
    first = data.draw(st.integers(0, len(spans) - 1))
    last = data.draw(st.integers(first, len(spans) - 1))
    start, end = spans[first][0], spans[last][1]
    assert RangeCounter(text, CachedCounter(EXACT)).count(start, end) == EXACT.count(text[start:end])


@EXAMPLES
@given(text=texts, budget=st.integers(1, 12))
def test_the_splitters_cut_where_they_cut_when_every_piece_is_encoded(text: str, budget: int) -> None:
    class Encoding:  # the same tokenizer without the whitespace shortcut
        splits_at_whitespace = False

        def count(self, value: str) -> int:
            return EXACT.count(value)

    plain = Encoding()
    assert split_tokens(text, budget, CachedCounter(EXACT)) == split_tokens(text, budget, plain)
    assert tail_tokens(text, budget, CachedCounter(EXACT)) == tail_tokens(text, budget, plain)
    assert split_text(text, budget, CachedCounter(EXACT)) == split_text(text, budget, plain)
