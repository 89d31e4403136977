from __future__ import annotations

from hrag_pg.ingest.clauses import (
    classify_heading,
    item_marker,
    looks_like_clauses,
    numeral_value,
    parse_clauses,
)

from .ingest_checks import FIXTURES, assert_leaves_nonempty, assert_text_preserved, find

ARTICLE_4 = """# 第4条：諸手当および福利厚生
1. 会社は、従業員の円滑な業務遂行を支援するため、本条の定めに従い手当を支給する。
2. 正社員に対しては、月額上限20,000円までの通勤手当の実費、および月額10,000円の昼食手当を支給する。
3. 試用期間中の従業員については、通勤手当は全額実費支給の対象とするが、昼食手当の適用は本採用以降とする。
4. 各手当は、毎月25日（休日の場合は前営業日）の給与支払い時に合算して口座振込にて支給する。
"""


def load(name: str):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return text, parse_clauses(text, name)


def test_article_4_becomes_parent_with_four_items() -> None:
    tree = parse_clauses(ARTICLE_4, "rules.md")
    (article,) = tree.root.children
    assert (article.kind, article.key, article.content) == (
        "clause",
        "第4条",
        "# 第4条：諸手当および福利厚生",  # the line as written: the root's text is the document
    )
    assert article.title == "第4条：諸手当および福利厚生"
    assert [(c.kind, c.key) for c in article.children] == [("item", str(n)) for n in range(1, 5)]
    assert article.children[2].content == ARTICLE_4.splitlines()[3]  # item 3 keeps its number


def test_article_4_in_work_rules_fixture_keeps_payment_day_with_probation_item() -> None:
    text, tree = load("work_rules_ja.md")
    article = find(tree, "第4条")
    assert len(article.children) == 4
    full = article.full_text()
    assert "試用期間中" in full and "毎月25日" in full
    assert ARTICLE_4.strip().splitlines()[1] in full
    assert_text_preserved(text, tree)
    assert_leaves_nonempty(tree)


def test_byod_article_nests_under_chapter_2_with_three_items() -> None:
    text, tree = load("security_policy_ja.md")
    chapter = find(tree, "第2章")
    byod = find(tree, "第8条")
    assert chapter.kind == "chapter" and byod.kind == "clause"
    assert byod in chapter.children
    assert [(c.kind, c.key) for c in byod.children] == [
        ("item", "8.1"),
        ("item", "8.2"),
        ("item", "8.3"),
    ]
    assert "ウイルス対策ソフト" in byod.children[0].content
    assert_text_preserved(text, tree)


def test_leading_article_text_becomes_a_paragraph_leaf_before_items() -> None:
    _, tree = load("work_rules_ja.md")
    article = find(tree, "第5条")
    assert (article.title, article.content) == ("第5条：試用期間", "# 第5条：試用期間")
    assert [c.kind for c in article.children] == ["paragraph", "item"]
    assert article.children[1].content.startswith("２\u3000試用期間中")


def test_kanji_numbered_article_gets_arabic_key() -> None:
    _, tree = load("work_rules_ja.md")
    article = find(tree, "第12条")
    assert article.title == "第十二条（退職の手続）"
    assert article.metadata == {"number": 12}
    assert [c.key for c in article.children] == [None, "（1）", "（2）"]


def test_numerals_in_arabic_fullwidth_and_kanji() -> None:
    assert [numeral_value(n) for n in ("12", "１２", "十二", "二十一", "百五", "二〇")] == [
        12,
        12,
        12,
        21,
        105,
        20,
    ]


def test_item_markers() -> None:
    assert item_marker("1. text") == "1"
    assert item_marker("１．テキスト") == "１"
    assert item_marker("２\u3000前項") == "２"
    assert item_marker("(1) a") == "(1)"
    assert item_marker("（1）あ") == "（1）"
    assert item_marker("①あ") == "①"
    assert item_marker("8.1 BYOD") == "8.1"
    assert item_marker("3.5%の利率") is None
    assert item_marker("2024年に") is None


def test_references_to_articles_inside_sentences_are_not_headings() -> None:
    assert classify_heading("第4条の規定にかかわらず、会社は") is None
    assert classify_heading("第4条の2（特例）").key == "第4条の2"  # type: ignore[union-attr]
    assert classify_heading("Article 5 of the Act applies") is None


def test_english_chapter_article_and_dotted_sections() -> None:
    text = (
        "Chapter 1 General\n\nArticle 1. Purpose\nThis agreement sets out the terms.\n\n"
        "Article 2 - Payment\nSection 2.1 Fees are due monthly.\nSection 2.2 Late fees apply.\n"
    )
    tree = parse_clauses(text, "contract.txt")
    chapter = find(tree, "Chapter 1")
    article_2 = find(tree, "Article 2")
    assert article_2 in chapter.children
    assert [c.key for c in article_2.children] == ["Section 2.1", "Section 2.2"]
    assert all(c.kind == "section" for c in article_2.children)
    assert_text_preserved(text, tree)


def test_looks_like_clauses_detects_articles_at_line_start_only() -> None:
    assert looks_like_clauses("# 第1条（目的）\n本文")
    assert looks_like_clauses("intro\nArticle 3 Scope\n")
    assert not looks_like_clauses("詳しくは第4条を参照。\n# Install")
