"""The seed's three Japanese cases, with the bundled English model and *default* settings, in every mode.

Nothing here is tuned per question: each call passes only the question and
its collection.  Expectations are the seed's (see README "Two commands"):

* probation: the whole 第4条 comes back, so item 4 (paid on the 25th) is in the context;
* anti-virus (narrow): 8.1 comes back without the rest of 第2章;
* all BYOD obligations (broad): 第8条 whole, merged from the hits among 8.1–8.3, not the chapter.
"""

from __future__ import annotations

import pytest

from hrag_pg.api import HRAG
from hrag_pg.models import RetrievalResult

pytestmark = pytest.mark.model

PROBATION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
ANTIVIRUS = "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？"
BYOD = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"


def _lead(result: RetrievalResult) -> str:
    """The text without the Markdown heading markers it is stored with (``## 第8条`` -> ``第8条``)."""
    return result.content.lstrip("#").lstrip()


def _is_chapter_2_or_above(result: RetrievalResult) -> bool:
    """The whole 第2章 (or the whole policy): the 'rest of 第2章' the narrow case must not drag in."""
    return _lead(result).startswith(("第2章", "情報セキュリティ管理規程"))


def test_auto_mode_returns_all_of_article_4_for_the_probation_question(hrag: HRAG) -> None:
    results = hrag.retrieve(PROBATION, collection="hr")
    article_4 = [r for r in results if _lead(r).startswith("第4条")]
    assert article_4, [r.content[:20] for r in results]
    assert "毎月25日" in article_4[0].content and "3. 試用期間中" in article_4[0].content


def test_auto_mode_keeps_the_antivirus_answer_small(hrag: HRAG) -> None:
    results = hrag.retrieve(ANTIVIRUS, collection="security")
    assert any("ウイルス対策ソフト" in r.content for r in results)
    assert _lead(results[0]).startswith(("8.1", "第8条")), results[0].content[:20]
    assert not any(_is_chapter_2_or_above(r) for r in results)


def _article_8(results: list[RetrievalResult]) -> RetrievalResult:
    """The result that is 第8条 (e5 puts the definition of BYOD, 第2条, closest to the broad question)."""
    return next(r for r in results if _lead(r).startswith("第8条"))


def test_auto_mode_merges_all_byod_obligations_into_article_8(hrag: HRAG) -> None:
    results = hrag.retrieve(BYOD, collection="security")
    assert all(item in _article_8(results).content for item in ("8.1", "8.2", "8.3"))
    assert not any(_is_chapter_2_or_above(r) for r in results)


def test_parent_child_returns_article_4_for_the_probation_question(hrag: HRAG) -> None:
    top = hrag.parent_child(PROBATION, collection="hr")[0]
    assert _lead(top).startswith("第4条") and "毎月25日" in top.content


def test_auto_merge_keeps_8_1_alone_for_the_antivirus_question(hrag: HRAG) -> None:
    results = hrag.auto_merge(ANTIVIRUS, collection="security")
    top = results[0]
    assert _lead(top).startswith("8.1") and not top.merged_from
    assert not any(_lead(r).startswith("第8条") or _is_chapter_2_or_above(r) for r in results)


def test_auto_merge_merges_all_byod_obligations_into_article_8(hrag: HRAG) -> None:
    results = hrag.auto_merge(BYOD, collection="security")
    article = _article_8(results)
    assert article.merged_from and all(item in article.content for item in ("8.1", "8.2", "8.3"))
    assert not any(_is_chapter_2_or_above(r) for r in results)
