from __future__ import annotations

import pytest

from hrag_pg.ingest.tokens import (
    ApproximateTokenCounter,
    TokenCounter,
    TokenizerCounter,
    split_tokens,
    tail_tokens,
)

counter = ApproximateTokenCounter()


def test_each_cjk_character_counts_one_token() -> None:
    assert counter.count("通勤手当") == 4
    assert counter.count("ひらがなカタカナ한국") == 10


def test_english_words_count_one_point_three_rounded_up() -> None:
    assert counter.count("one two three four five six seven eight nine ten") == 13
    assert counter.count("word") == 2


def test_mixed_text_adds_cjk_characters_and_words() -> None:
    # 月額上限 (4) + 円までの (4) + the word "20,000" (ceil 1.3) = 10
    assert counter.count("月額上限20,000円までの") == 10


def test_whitespace_counts_zero() -> None:
    assert counter.count(" \n\t ") == 0


def test_tokenizer_counter_excludes_special_tokens() -> None:
    class FakeTokenizer:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            ids = [len(word) for word in text.split()]
            return [101, *ids, 102] if add_special_tokens else ids

    wrapped = TokenizerCounter(FakeTokenizer())
    assert isinstance(wrapped, TokenCounter)
    assert wrapped.count("a bb ccc") == 3


def test_split_tokens_reproduces_text_and_respects_budget() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta iota kappa " * 5
    pieces = split_tokens(text, 10, counter)
    assert "".join(pieces) == text
    assert len(pieces) > 1
    assert all(counter.count(piece) <= 10 for piece in pieces)


def test_split_tokens_never_cuts_inside_a_word() -> None:
    text = "internationalisation " * 20
    pieces = split_tokens(text, 5, counter)
    for piece in pieces:
        assert set(piece.split()) == {"internationalisation"}


def test_split_tokens_cuts_japanese_between_characters() -> None:
    text = "会社は従業員に手当を支給する。" * 4
    pieces = split_tokens(text, 7, counter)
    assert "".join(pieces) == text
    assert all(counter.count(piece) <= 7 for piece in pieces)


def test_split_tokens_rejects_zero_budget() -> None:
    with pytest.raises(ValueError, match="max_tokens must be at least 1"):
        split_tokens("x", 0, counter)


def test_tail_tokens_takes_whole_words_from_the_end() -> None:
    tail = tail_tokens("the quick brown fox jumps over", 3, counter)  # 2 words = ceil(2.6)
    assert tail == "jumps over"
    assert tail_tokens("anything", 0, counter) == ""


def test_tail_tokens_takes_whole_cjk_characters() -> None:
    assert tail_tokens("昼食手当を支給する。", 3, counter) == "する。"


def test_cached_counter_counts_each_text_once() -> None:
    from hrag_pg.ingest.tokens import CachedCounter

    calls: list[str] = []

    class Counting:
        def count(self, text: str) -> int:
            calls.append(text)
            return len(text.split())

    cached = CachedCounter(Counting())
    assert [cached.count("a b"), cached.count("a b"), cached.count("c")] == [2, 2, 1]
    assert calls == ["a b", "c"]
