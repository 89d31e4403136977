"""The seed's worked examples, end to end, with the real bundled model (all-MiniLM-L6-v2)."""

from __future__ import annotations

import pytest

from hrag_pg import demo
from hrag_pg.api import HRAG, AutoMergingRetriever, ParentChildRetriever

pytestmark = pytest.mark.model


def test_probation_allowances_question_returns_article_4_with_the_payment_day(hrag: HRAG) -> None:
    results = ParentChildRetriever(hrag, collection="hr").retrieve(
        "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？")
    top = results[0]
    assert top.title == "第4条：諸手当および福利厚生"
    assert "毎月25日" in top.content, "item 4 (the payment day) is in the parent's context"
    item_3 = next(n for n in hrag.repository.children(top.node_id) if n.content.startswith("3."))
    assert item_3.id in (top.matched_children or [])


def test_narrow_antivirus_question_keeps_8_1_unmerged(hrag: HRAG) -> None:
    results = AutoMergingRetriever(hrag, collection="security", **demo.SMALL_JAPANESE_DOCUMENT).retrieve(
        "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？")
    assert results[0].content.startswith("8.1")
    assert results[0].merged_from == []
    assert not any(r.title == "第8条（BYOD）" for r in results)


def test_all_byod_obligations_merge_into_article_8(hrag: HRAG) -> None:
    results = AutoMergingRetriever(hrag, collection="security", **demo.SMALL_JAPANESE_DOCUMENT).retrieve(
        "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください")
    top = results[0]
    assert top.title == "第8条（BYOD）"
    assert top.hit_ratio == pytest.approx(1.0)
    merged = {n.content[:3] for n in hrag.repository.children(top.node_id) if n.id in top.merged_from}
    assert merged == {"8.1", "8.2", "8.3"}


@pytest.mark.parametrize("case", demo.CASES, ids=lambda c: c.title)
def test_every_demo_case_meets_its_expectation(hrag: HRAG, case: demo.DemoCase) -> None:
    results, ok = demo.run_case(hrag, case)
    assert ok, f"{case.expectation}: got {[r.heading_path for r in results[:3]]}"


def test_reingesting_the_examples_embeds_nothing(hrag: HRAG) -> None:
    reports = demo.ingest_examples(hrag)
    assert {r.status for report in reports for r in report.results} == {"unchanged"}
    assert sum(report.embedded for report in reports) == 0


def test_without_the_floor_top_k_12_over_a_35_item_policy_climbs_past_article_8(hrag: HRAG) -> None:
    """Why the demo sets min_relative_score: a third of the document is hit, so merges climb."""
    results = AutoMergingRetriever(hrag, collection="security", min_relative_score=None).retrieve(
        "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください")
    assert results[0].title != "第8条（BYOD）"
    assert results[0].depth < 3
