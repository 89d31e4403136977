from __future__ import annotations

from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.window import parse_window

from .ingest_checks import assert_leaves_nonempty, assert_text_preserved

counter = ApproximateTokenCounter()


def paragraph(n: int, words: int = 30) -> str:
    return " ".join(f"w{n}_{i}" for i in range(words)) + "."


def test_windows_pack_whole_paragraphs_up_to_the_budget() -> None:
    text = "\n\n".join(paragraph(n) for n in range(10))  # 39 tokens each
    tree = parse_window(text, "notes.txt", parent_tokens=100, counter=counter)
    windows = tree.root.children
    assert all(w.kind == "window" and w.content == "" for w in windows)
    assert [len(w.children) for w in windows] == [2, 2, 2, 2, 2]
    assert [w.title for w in windows][:2] == ["Window 1", "Window 2"]
    assert all(counter.count(w.full_text()) <= 100 for w in windows)
    assert_text_preserved(text, tree)


def test_paragraph_longer_than_a_window_is_cut_at_sentences() -> None:
    long = " ".join(f"Sentence number {i} is here." for i in range(60))
    tree = parse_window(long, "x", parent_tokens=50, counter=counter)
    assert len(tree.root.children) > 1
    for window in tree.root.children:
        assert counter.count(window.full_text()) <= 50
        assert window.full_text().rstrip().endswith("here.")
    assert_text_preserved(long, tree)
    assert_leaves_nonempty(tree)


def test_default_window_is_about_1200_tokens() -> None:
    text = "\n\n".join(paragraph(n, 100) for n in range(30))  # 130 tokens each
    tree = parse_window(text, "x", counter=counter)
    assert [len(w.children) for w in tree.root.children] == [9, 9, 9, 3]
