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
    assert len(pieces) > 1 and "".join(pieces) == text
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


def test_priming_counts_the_missing_texts_in_one_batch_call() -> None:
    from hrag_pg.ingest.tokens import CachedCounter

    singles: list[str] = []
    batches: list[list[str]] = []

    class Batching:
        def count(self, text: str) -> int:
            singles.append(text)
            return len(text.split())

        def count_many(self, texts: list[str]) -> list[int]:
            batches.append(texts)
            return [len(text.split()) for text in texts]

    cached = CachedCounter(Batching())
    cached.count("a b")
    cached.prime(["a b", "c d e", "c d e", "f"])
    assert batches == [["c d e", "f"]], "one call, each missing text once"
    assert [cached.count("c d e"), cached.count("f"), cached.count("g h")] == [3, 1, 2]
    assert singles == ["a b", "g h"], "primed texts are not counted again"


def test_a_document_prepared_with_batch_counts_matches_one_by_one_counts() -> None:
    """The bundled model's tokenizer counts the same in one batch as text by text (ingestion primes with it)."""
    from pathlib import Path

    from hrag_pg.embedders.sentence_transformers import load_tokenizer as _load_tokenizer
    from hrag_pg.embedding import default_model_path
    from hrag_pg.ingest.pipeline import IngestOptions, prepare_file

    tokenizer = _load_tokenizer(default_model_path())
    assert tokenizer is not None
    batching = TokenizerCounter(tokenizer)

    class OneByOne:
        def count(self, text: str) -> int:
            return batching.count(text)

    texts = ["", "plain words", "第8条 BYOD端末には、会社が指定するウイルス対策ソフトをインストールする。",
             "a very long paragraph " * 400]
    assert batching.count_many(texts) == [batching.count(text) for text in texts]
    for name in ("guide.md", "work_rules_ja.md"):
        fixture = Path(__file__).resolve().parents[1] / "fixtures" / name
        primed = prepare_file(fixture, IngestOptions(), counter=batching)
        lazy = prepare_file(fixture, IngestOptions(), counter=OneByOne())
        assert [(n.id, n.token_count, n.subtree_tokens, n.content) for n in primed.nodes] == \
            [(n.id, n.token_count, n.subtree_tokens, n.content) for n in lazy.nodes]
