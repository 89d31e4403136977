from __future__ import annotations

import pytest

from hrag_pg.ingest.children import (
    QuestionGenerator,
    add_qa_children,
    extract_facts,
    is_fact,
    sentence_spans,
    split_functions,
    split_paragraphs,
    split_sentences,
)
from hrag_pg.ingest.clauses import parse_clauses
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import DocumentTree, DraftNode

from .ingest_checks import FIXTURES, assert_leaves_nonempty, assert_text_preserved

counter = ApproximateTokenCounter()

LONG_EN = " ".join(
    f"Clause {i} requires the tenant to report damage to the landlord within {i} days."
    for i in range(1, 21)
)
LONG_JA = "".join(
    f"従業員は第{i}項の定めに従い、所定の様式により申請を行うものとする。" for i in range(1, 16)
)


def one_leaf_tree(text: str, kind: str = "paragraph", key: str | None = "p") -> DocumentTree:
    root = DraftNode(kind="document", children=[DraftNode(kind=kind, content=text, key=key)])
    return DocumentTree(source="x", root=root)


def test_long_paragraph_is_replaced_in_place_by_siblings_within_budget() -> None:
    tree = one_leaf_tree(LONG_EN)
    split_paragraphs(tree, max_tokens=60, overlap_tokens=10, counter=counter)
    pieces = tree.root.children
    assert len(pieces) > 1
    assert all(p.kind == "paragraph" and p.is_leaf for p in pieces)
    assert [p.key for p in pieces] == [f"p#{i}" for i in range(1, len(pieces) + 1)]
    assert all(counter.count(p.content) <= 60 for p in pieces)
    assert "".join(p.content for p in pieces) == LONG_EN  # no text lost, none duplicated


def test_pieces_end_at_sentence_boundaries() -> None:
    tree = split_paragraphs(one_leaf_tree(LONG_EN), max_tokens=60, counter=counter)
    assert all(p.content.rstrip().endswith("days.") for p in tree.root.children)


def test_adjacent_pieces_overlap_by_whole_words_from_previous_piece() -> None:
    tree = split_paragraphs(
        one_leaf_tree(LONG_EN), max_tokens=60, overlap_tokens=25, counter=counter
    )
    first, second = tree.root.children[:2]
    assert first.overlap_prefix == ""
    assert second.overlap_prefix
    assert first.content.rstrip().endswith(second.overlap_prefix)
    assert 20 <= counter.count(second.overlap_prefix) <= 25
    assert set(second.overlap_prefix.split()) <= set(first.content.split())


def test_japanese_overlap_takes_whole_characters() -> None:
    tree = split_paragraphs(
        one_leaf_tree(LONG_JA), max_tokens=100, overlap_tokens=25, counter=counter
    )
    pieces = tree.root.children
    assert len(pieces) > 1
    assert "".join(p.content for p in pieces) == LONG_JA
    assert all(p.content.endswith("。") for p in pieces)
    assert pieces[1].overlap_prefix == pieces[0].content[-len(pieces[1].overlap_prefix) :]
    assert counter.count(pieces[1].overlap_prefix) == 25


def test_short_leaves_and_keyless_leaves_are_handled() -> None:
    tree = one_leaf_tree("Short.", key=None)
    split_paragraphs(tree, max_tokens=150, counter=counter)
    assert [c.content for c in tree.root.children] == ["Short."]
    tree = split_paragraphs(one_leaf_tree(LONG_EN, key=None), max_tokens=60, counter=counter)
    assert all(p.key is None for p in tree.root.children)


def test_long_code_is_cut_between_lines() -> None:
    code = "\n".join(f"value_{i} = compute(value_{i - 1}, factor={i})" for i in range(1, 40))
    tree = split_paragraphs(one_leaf_tree(code, kind="code"), max_tokens=50, counter=counter)
    pieces = [p.content for p in tree.root.children]
    assert len(pieces) > 1 and "".join(pieces) == code
    assert all(piece.rstrip("\n").split("\n")[-1].startswith("value_") for piece in pieces)


def test_sentence_spans_do_not_split_abbreviations_decimals_or_list_numbers() -> None:
    text = "1. Rates rose 3.5 percent, e.g. in Tokyo. Mr. Sato agreed! 次に進む。本当？ Done"
    assert sentence_spans(text) == [
        "1. Rates rose 3.5 percent, e.g. in Tokyo. ",
        "Mr. Sato agreed! ",
        "次に進む。",
        "本当？ ",
        "Done",
    ]
    assert "".join(sentence_spans(text)) == text


def test_a_blank_line_ends_a_sentence_unless_a_lead_in_colon_precedes_it() -> None:
    text = "Encoding basic objects\n\nDecoding JSON::\n\n    >>> json.loads('[1]')\n    [1]\n\nDone"
    assert sentence_spans(text) == [
        "Encoding basic objects\n\n",
        "Decoding JSON::\n\n    >>> json.loads('[1]')\n    [1]\n\n",
        "Done",
    ]


def test_a_long_prose_leaf_of_many_lines_is_cut_between_lines_not_mid_line() -> None:
    # a module docstring's doctest, a Markdown table or link list read as one paragraph:
    # no sentence ends in it, so the old cut fell between words in the middle of a line
    lines = [f"    >>> json.dumps({{'key_{i}': [{i}, {i + 1}]}}, sort_keys=True)" for i in range(30)]
    text = "Pretty printing:\n" + "\n".join(lines)
    tree = split_paragraphs(one_leaf_tree(text), max_tokens=60, counter=counter)
    pieces = [p.content for p in tree.root.children]
    assert len(pieces) > 1 and "".join(pieces) == text
    assert all(counter.count(piece) <= 60 for piece in pieces)
    assert all(piece.endswith("\n") for piece in pieces[:-1])  # every cut at a line end


def test_sentence_groups_hold_at_most_group_sentences() -> None:
    text = "One. Two. Three. Four. Five."
    tree = split_sentences(one_leaf_tree(text), group=2)
    groups = tree.root.children
    assert [g.content for g in groups] == ["One. Two. ", "Three. Four. ", "Five."]
    assert all(g.kind == "sentence" and g.metadata["source_kind"] == "paragraph" for g in groups)
    with pytest.raises(ValueError, match="group must be at least 1"):
        split_sentences(one_leaf_tree(text), group=0)


def test_sentence_split_leaves_code_alone() -> None:
    tree = split_sentences(one_leaf_tree("x = 1. y = 2.", kind="code"))
    assert tree.root.children[0].kind == "code"


def test_facts_get_one_leaf_each_and_other_sentences_are_kept() -> None:
    text = (
        "本制度は従業員の福利厚生を目的とする。"
        "通勤手当は月額上限20,000円とする。"
        "詳細は人事部が案内する。"
        "申請は入社後30日以内に行わなければならない。"
    )
    tree = extract_facts(one_leaf_tree(text))
    kinds = [(c.kind, c.content) for c in tree.root.children]
    assert kinds == [
        ("paragraph", "本制度は従業員の福利厚生を目的とする。"),
        ("fact", "通勤手当は月額上限20,000円とする。"),
        ("paragraph", "詳細は人事部が案内する。"),
        ("fact", "申請は入社後30日以内に行わなければならない。"),
    ]
    assert "".join(c.content for c in tree.root.children) == text


def test_single_sentence_or_fact_free_leaves_are_unchanged() -> None:
    assert extract_facts(one_leaf_tree("Salary is 300 EUR.")).root.children[0].kind == "paragraph"
    assert (
        extract_facts(one_leaf_tree("Hello there. Nice day.")).root.children[0].kind == "paragraph"
    )


def test_is_fact_recognises_numbers_amounts_and_requirements() -> None:
    assert is_fact("Passwords must be changed.")
    assert is_fact("パスコードは六桁以上とする。")
    assert is_fact("報告は二十四時間以内。")
    assert not is_fact("The policy applies to everyone.")


class FixedQuestions:
    def questions(self, text: str) -> list[str]:
        return [
            "試用期間中に昼食手当は出ますか？",
            " ",
            "試用期間中に昼食手当は出ますか？",
            "いつ支給されますか？",
        ]


def test_qa_children_are_added_under_every_leaf() -> None:
    text = (FIXTURES / "work_rules_ja.md").read_text(encoding="utf-8")
    tree = parse_clauses(text, "rules")
    leaves_before = tree.root.leaves()
    generator = FixedQuestions()
    assert isinstance(generator, QuestionGenerator)
    add_qa_children(tree, generator)
    for leaf in leaves_before:
        assert [(c.kind, c.content) for c in leaf.children] == [
            ("qa", "試用期間中に昼食手当は出ますか？"),
            ("qa", "いつ支給されますか？"),
        ]
    assert all(leaf.kind == "qa" for leaf in tree.root.leaves())


def test_splitters_preserve_a_real_document() -> None:
    text = (FIXTURES / "guide.md").read_text(encoding="utf-8")
    tree = parse_markdown(text, "guide.md")
    split_paragraphs(tree, max_tokens=12, overlap_tokens=4, counter=counter)
    extract_facts(tree)
    split_sentences(tree, group=1)
    assert_text_preserved(text, tree)
    assert_leaves_nonempty(tree)


CODE_DOC = """# Example

```python
import os

# a helper
@cache
def helper(x):
    return x


class Store:
    def get(self):
        pass
```

```bash
def is not python here
class neither
```
"""


def test_function_children_cut_python_blocks_at_top_level_definitions() -> None:
    tree = split_functions(parse_markdown(CODE_DOC, "x.md"))
    section = tree.root.children[0]
    assert [(c.kind, c.separator, c.content) for c in section.children] == [
        ("code", "\n\n", "```python\nimport os\n\n"),
        ("function", "", "# a helper\n@cache\ndef helper(x):\n    return x\n\n\n"),
        ("function", "", "class Store:\n    def get(self):\n        pass\n```"),
        ("code", "\n\n", "```bash\ndef is not python here\nclass neither\n```"),
    ]
    assert tree.root.full_text() == CODE_DOC.strip()
    assert section.children[1].metadata["source_kind"] == "code"


def test_function_children_differ_from_paragraph_children_only_in_code_blocks() -> None:
    from hrag_pg.ingest.pipeline import IngestOptions, refine

    def kinds(child: str) -> list[str]:
        tree = refine(parse_markdown(CODE_DOC, "x.md"), IngestOptions(child=child))  # type: ignore[arg-type]
        return [leaf.kind for leaf in tree.root.leaves()]

    assert kinds("paragraph") == ["code", "code"]
    assert kinds("function") == ["code", "function", "function", "code"]
