"""A node's ``lead``: the start of its text on one line, which tells untitled siblings apart."""

from __future__ import annotations

from hrag_pg.operations.reading import LEAD_CHARS, lead


def test_the_lead_is_the_start_of_the_text_on_one_line() -> None:
    assert lead("Rotate the keys\n  every   90 days.") == "Rotate the keys every 90 days."


def test_a_long_text_is_cut_with_an_ellipsis() -> None:
    cut = lead("word " * 40)
    assert len(cut) == LEAD_CHARS + 1 and cut.endswith("…")


def test_rules_above_a_plain_text_section_are_skipped() -> None:
    text = "=" * 70 + "\n~~~~\n\n  レッスン 1.1:  カーソルの移動\n\n本文"
    assert lead(text) == "レッスン 1.1: カーソルの移動 本文"


def test_a_text_of_rules_only_keeps_them() -> None:
    assert lead("----\n====") == "---- ===="
