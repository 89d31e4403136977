"""The seed's worked examples, end to end, with the real bundled model (all-MiniLM-L6-v2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from hrag_pg import demo
from hrag_pg.api import HRAG
from hrag_pg.settings import AutoMergeSettings, for_mode

pytestmark = pytest.mark.model


def _lead(content: str) -> str:
    """A node's text without the Markdown heading markers it is stored with (``## 第8条`` -> ``第8条``)."""
    return content.lstrip("#").lstrip()


def test_probation_allowances_question_returns_article_4_with_the_payment_day(hrag: HRAG) -> None:
    results = hrag.parent_child(
        "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", collection="hr")
    top = results[0]
    assert top.title == "第4条：諸手当および福利厚生"
    assert "毎月25日" in top.content, "item 4 (the payment day) is in the parent's context"
    item_3 = next(n for n in hrag.repository.children(top.node_id) if n.content.startswith("3."))
    assert item_3.id in (top.matched_children or [])


def test_narrow_antivirus_question_keeps_8_1_unmerged(hrag: HRAG) -> None:
    results = hrag.auto_merge(
        "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？", collection="security")
    assert results[0].content.startswith("8.1")
    assert results[0].merged_from == []
    assert not any(r.title == "第8条（BYOD）" for r in results)


def test_all_byod_obligations_merge_into_article_8(hrag: HRAG) -> None:
    results = hrag.auto_merge(
        "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください", collection="security")
    article = next(r for r in results if r.title == "第8条（BYOD）")
    assert article.hit_ratio == pytest.approx(2 / 3), "8.1 and 8.3 are hits; 8.2, far below the best, is none"
    merged = {n.content[:3] for n in hrag.repository.children(article.node_id) if n.id in article.merged_from}
    assert merged == {"8.1", "8.3"}
    assert all(item in article.content for item in ("8.1", "8.2", "8.3"))


@dataclass(frozen=True)
class Expected:
    """One demo question and, written here rather than taken from hrag_pg/demo.py, what its answer must be."""

    question: str
    mode: str
    collection: str
    settings: dict[str, Any]
    top_heading: str  # the last heading of the top result
    top_starts_with: str | tuple[str, ...]
    top_contains: tuple[str, ...]
    top_merged_from: tuple[str, ...] | None  # first 3 characters of each merged child; () = not merged
    nowhere: tuple[str, ...]  # text no result may start with
    #: Check the first result under ``top_heading`` rather than the first result: for "all BYOD
    #: obligations" e5 puts the definition of BYOD (第2条) closest to the question, and it comes
    #: along, first; the merged article is what the seed promises (docs/decisions.md, "Scores above
    #: the question's background").
    by_heading: bool = False


#: The Japanese cases use the defaults too (no per-question settings).
JA_SMALL: dict[str, Any] = {}
EXPECTED = [
    Expected("試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "parent-child", "hr", {},
             "第4条：諸手当および福利厚生", "第4条：諸手当および福利厚生",
             ("3. 試用期間中の従業員については、通勤手当は全額実費支給の対象とするが、"
              "昼食手当の適用は本採用以降とする。", "毎月25日"), None, ()),
    Expected("私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？", "auto-merge", "security", JA_SMALL,
             "第8条（BYOD）", "8.1 BYOD端末には、会社が指定するウイルス対策ソフトを", (), (), ("第8条",)),
    # (8.2 scores under 0.6 of the best hit: no evidence, but the merge of 8.1 and 8.3 brings the
    # whole article)
    Expected("私物端末（BYOD）を業務で使う場合の義務をすべて教えてください", "auto-merge", "security", JA_SMALL,
             "第8条（BYOD）", "第8条（BYOD）",
             ("ウイルス対策ソフトをインストール", "6桁以上のパスコード", "24時間以内に情報システム部へ報告"),
             ("8.1", "8.3"), ("第2章", "情報セキュリティ管理規程"), by_heading=True),
    Expected("How long are messages kept before they are deleted?", "parent-child", "manual", {},
             "Retention Policies", "Retention Policies", ("The default retention period is 72 hours",), None, ()),
    Expected("試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "auto", "hr", {},
             "第4条：諸手当および福利厚生", "第4条：諸手当および福利厚生", ("毎月25日",), None, ("第2章", "就業規則")),
    # (8.1 alone, or the 75-token article that opens with it: the demo's own check, "8.1 first")
    Expected("私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？", "auto", "security", {},
             "第8条（BYOD）", ("8.1 BYOD端末には、会社が指定するウイルス対策ソフトを",
                            "第8条（BYOD）\n8.1 BYOD端末には、会社が指定するウイルス対策ソフトを"), (), None,
             ("第2章", "情報セキュリティ管理規程")),
    Expected("私物端末（BYOD）を業務で使う場合の義務をすべて教えてください", "auto", "security", {},
             "第8条（BYOD）", "第8条（BYOD）",
             ("ウイルス対策ソフトをインストール", "6桁以上のパスコード", "24時間以内に情報システム部へ報告"),
             None, ("第2章", "情報セキュリティ管理規程"), by_heading=True),
]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: f"{e.mode}-{e.collection}-{e.top_heading}")
def test_every_demo_question_returns_the_stated_context(hrag: HRAG, expected: Expected) -> None:
    settings = for_mode(expected.mode, collection=expected.collection, **expected.settings)
    results = hrag.context(expected.question, settings).results
    assert results, "no results"
    top = next((r for r in results if r.heading_path[-1] == expected.top_heading), results[0]) \
        if expected.by_heading else results[0]
    assert top.heading_path[-1] == expected.top_heading, [r.heading_path for r in results]
    assert _lead(top.content).startswith(expected.top_starts_with), top.content[:80]
    for text in expected.top_contains:
        assert text in top.content, f"{text!r} missing from the top result"
    if expected.top_merged_from is not None:
        merged = sorted(n.content[:3] for n in hrag.repository.children(top.node_id) if n.id in top.merged_from)
        assert merged == sorted(expected.top_merged_from)
        if not expected.top_merged_from:
            assert top.merged_from == []
    for text in expected.nowhere:
        assert not any(_lead(r.content).startswith(text) for r in results), f"a result starts with {text!r}"


def test_the_demo_asks_exactly_these_questions_and_its_own_checks_agree(hrag: HRAG) -> None:
    """The demo shows the same cases (its pass/fail is then checked against this file's expectations)."""
    assert [(c.question, c.mode, c.collection, c.settings) for c in demo.CASES] == [
        (e.question, e.mode, e.collection, e.settings) for e in EXPECTED]
    for case in demo.CASES:
        _, ok = demo.run_case(hrag, case)
        assert ok, case.expectation


def test_reingesting_the_examples_embeds_nothing(hrag: HRAG) -> None:
    reports = demo.ingest_examples(hrag)
    assert {r.status for report in reports for r in report.results} == {"unchanged"}
    assert sum(report.embedded for report in reports) == 0


def test_without_the_hit_share_cap_and_the_floor_top_k_12_over_a_35_item_policy_climbs_past_article_8(
        hrag: HRAG) -> None:
    """Twelve hits are a third of a 35-item policy: counted by rank, they merge past 第8条 into chapters.
    Either rule keeps the merge at the article: the cap (a tenth of a small collection) or the floor
    (a hit under 0.6 of the best is no hit)."""
    question = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"
    by_rank = hrag.auto_merge(question, AutoMergeSettings(max_hit_share=None, min_relative_score=None),
                              collection="security")
    assert any(r.depth < 2 for r in by_rank), [(r.depth, r.title) for r in by_rank]
    for settings in (AutoMergeSettings(max_hit_share=None), AutoMergeSettings(min_relative_score=None)):
        results = hrag.auto_merge(question, settings, collection="security")
        assert "第8条（BYOD）" in [r.title for r in results] and all(r.depth >= 2 for r in results)
