"""The pure parts of hrag_pg.evaluation: question files, snippet matching, budgets, statistics."""

from __future__ import annotations

import json
import math

import pytest

from hrag_pg.evaluation import (
    Question,
    WordTruncator,
    load_questions,
    percentile,
    score_passages,
    snippets_found,
    summarize,
    truncate_passages,
)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def record(qid="n01", kind="narrow", question="What?", evidence=("some evidence text",)):
    return {"id": qid, "kind": kind, "question": question, "evidence": list(evidence)}


# --------------------------------------------------------------------------- load_questions


def test_load_questions_reads_every_line_and_skips_blank_ones(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps(record("a")) + "\n\n" + json.dumps(record("b", "broad")) + "\n", encoding="utf-8")
    questions = load_questions(path)
    assert [q.id for q in questions] == ["a", "b"]
    assert questions[1] == Question("b", "broad", "What?", ("some evidence text",))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": "x", "kind": "narrow", "question": "q"}, "missing field"),
        (record(kind="medium"), "'kind' must be one of"),
        (record(evidence=[]), "'evidence' must be a non-empty list"),
        (record(evidence=["ok", 3]), "'evidence' must be a non-empty list"),
        (record(question="  "), "'question' must be a non-empty string"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_load_questions_names_the_line_and_the_problem(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "q.jsonl", [record("ok"), bad])
    with pytest.raises(ValueError, match=message) as info:
        load_questions(path)
    assert "q.jsonl:2" in str(info.value)


def test_load_questions_refuses_duplicate_ids_and_bad_json(tmp_path):
    with pytest.raises(ValueError, match="duplicate question id 'a'"):
        load_questions(write_jsonl(tmp_path / "dup.jsonl", [record("a"), record("a")]))
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_questions(broken)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no questions"):
        load_questions(empty)


# --------------------------------------------------------------------------- matching


def test_snippet_matching_ignores_line_breaks_and_repeated_spaces():
    passages = ["The standard form of VACUUM removes dead\nrow versions   in tables and indexes."]
    assert snippets_found(passages, ["dead row versions in tables", "VACUUM  removes\tdead"]) == [True, True]


def test_snippet_matching_is_case_and_punctuation_sensitive():
    assert snippets_found(["VACUUM removes dead rows."], ["vacuum removes", "VACUUM removes dead rows!"]) == [
        False, False]


def test_a_snippet_never_matches_across_two_passages():
    assert snippets_found(["first half of a", "sentence continues"], ["of a sentence"]) == [False]
    assert snippets_found(["first half of a sentence continues"], ["of a sentence"]) == [True]


def test_no_passages_find_nothing():
    assert snippets_found([], ["anything"]) == [False]


# --------------------------------------------------------------------------- budgets


def test_truncation_keeps_whole_passages_then_cuts_the_first_that_does_not_fit():
    words = WordTruncator()
    passages = ["a b c", "d e f g", "h i"]
    assert truncate_passages(passages, 9, words) == passages
    assert truncate_passages(passages, 5, words) == ["a b c", "d e"]
    assert truncate_passages(passages, 3, words) == ["a b c"]
    assert truncate_passages(passages, 1, words) == ["a"]


def test_truncation_uses_given_counts_and_refuses_a_non_positive_budget():
    assert truncate_passages(["a b c", "d"], 1, WordTruncator(), counts=[0, 1]) == ["a b c", "d"]
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        truncate_passages(["a"], 0, WordTruncator())


def test_tokenizer_truncator_cuts_at_token_offsets_keeping_the_original_text():
    from hrag_pg.evaluation import TokenizerTruncator

    class FakeFastTokenizer:  # one token per word, offsets like a HuggingFace fast tokenizer
        is_fast = True

        def __call__(self, text, **kwargs):
            import re

            spans = [m.span() for m in re.finditer(r"\S+", text)]
            out = {"input_ids": list(range(len(spans)))}
            if kwargs.get("return_offsets_mapping"):
                out["offset_mapping"] = spans
            return out

    truncator = TokenizerTruncator(FakeFastTokenizer())
    assert truncator.count("Hello  World again") == 3
    assert truncator.cut("Hello  World again", 2) == "Hello  World"
    assert truncator.cut("Hello", 5) == "Hello"
    assert truncator.cut("Hello", 0) == ""


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([5.0], 95, 5.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0, 5.0], 50, 3.0),
        ([4.0, 1.0, 3.0, 2.0, 5.0], 0, 1.0),
        ([4.0, 1.0, 3.0, 2.0, 5.0], 100, 5.0),
        (list(map(float, range(1, 21))), 95, 19.05),
    ],
)
def test_percentile_interpolates_linearly_between_closest_ranks(values, q, expected):
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_agrees_with_numpy_and_handles_no_values():
    np = pytest.importorskip("numpy")
    values = [13.0, 2.5, 7.25, 100.0, 0.5, 42.0, 8.0]
    for q in (5, 50, 90, 95, 99):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="percentile must be between 0 and 100"):
        percentile([1.0], 101)


def test_scoring_one_question_counts_tokens_and_budget_recall():
    q = Question("b1", "broad", "?", ("alpha beta", "gamma delta", "omega"))
    result = score_passages(q, ["x alpha beta", "y z gamma delta"], 12.5, WordTruncator(), budgets=(3, 4, 100))
    assert result.found == [True, True, False]
    assert result.recall == pytest.approx(2 / 3)
    assert not result.full
    assert result.tokens == 7 and result.passages == 2
    assert result.budget_found[3] == [True, False, False]
    assert result.budget_found[4] == [True, False, False]
    assert result.budget_found[100] == [True, True, False]


def test_summary_aggregates_per_kind_and_overall():
    words = WordTruncator()
    narrow = Question("n1", "narrow", "?", ("needle",))
    broad = Question("b1", "broad", "?", ("one", "two", "three", "four"))
    results = [
        score_passages(narrow, ["a needle here"], 10.0, words, budgets=(2,)),
        score_passages(narrow, ["nothing"], 30.0, words, budgets=(2,)),
        score_passages(broad, ["one two", "three"], 20.0, words, budgets=(2,)),
    ]
    results[1].id = "n2"
    report = summarize("sys", results, {"mode": "x"}, budgets=(2,))
    n, b, everything = report.summary("narrow"), report.summary("broad"), report.summary("all")
    assert (n.questions, n.recall, n.full_recall_rate) == (2, 0.5, 0.5)
    assert n.mean_tokens == pytest.approx(2.0)
    assert n.recall_per_1k_tokens == pytest.approx(0.5 / 0.002)
    assert (n.latency_p50_ms, n.latency_p95_ms) == (pytest.approx(20.0), pytest.approx(29.0))
    assert n.budget_recall[2] == pytest.approx(0.5)  # "a needle here" cut to "a needle" still has it
    assert b.recall == pytest.approx(0.75) and b.full_recall_rate == 0.0
    assert b.budget_recall[2] == pytest.approx(0.5)
    assert everything.questions == 3
    assert everything.recall == pytest.approx((1 + 0 + 0.75) / 3)
    assert report.kinds == ["narrow", "broad", "all"]


def test_report_serialises_and_renders():
    q = Question("n1", "narrow", "?", ("needle",))
    report = summarize("hrag-pg auto-merge", [score_passages(q, ["needle"], 3.0, WordTruncator())],
                       {"mode": "auto-merge", "lexical_weight": 0.5})
    payload = report.to_json()
    json.dumps(payload)  # plain JSON
    assert payload["summary"]["narrow"]["recall"] == 1.0
    assert payload["questions"][0]["budget_found"] == {"2000": [True], "4000": [True]}
    from rich.console import Console

    console = Console(record=True, width=200)
    console.print(report.render())
    text = console.export_text()
    assert "hrag-pg auto-merge" in text and "@2,000" in text and "narrow" in text


def test_the_report_table_fits_an_80_column_terminal_without_cut_headers() -> None:
    # a pipe or a default terminal is 80 columns: headers cut to "reca…" said nothing
    q = Question("n1", "narrow", "?", ("needle",))
    report = summarize("hrag-pg auto", [score_passages(q, ["needle " * 3000], 3.0, WordTruncator())],
                       {"mode": "auto", "max_tokens": 2000, "collection": "a-long-collection-name"})
    from rich.console import Console

    console = Console(record=True, width=80)
    console.print(report.render())
    text = console.export_text()
    assert "…" not in text
    for header in ("kind", "recall", "full", "tokens", "per 1k", "p50 ms", "p95 ms", "@2,000", "@4,000"):
        assert header in text


def test_a_counter_truncator_keeps_the_longest_prefix_within_the_budget() -> None:
    from hrag_pg.evaluation import CounterTruncator
    from hrag_pg.ingest.tokens import ApproximateTokenCounter

    truncator = CounterTruncator(ApproximateTokenCounter())
    text = "試用期間中の従業員については、通勤手当は全額実費支給の対象とする。"
    assert truncator.cut(text, 1000) == text and truncator.cut(text, 0) == ""
    for budget in range(1, truncator.count(text)):
        kept = truncator.cut(text, budget)
        assert text.startswith(kept) and truncator.count(kept) <= budget < truncator.count(text[:len(kept) + 1])
