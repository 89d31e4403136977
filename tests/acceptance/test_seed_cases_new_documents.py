"""The seed's cases with defaults on documents written for this, not the demo's (issue #49).

Two of the Japanese regulations of bench/corpora (a wage regulation with an
article on pay during probation, an IT usage policy whose chapter on devices
holds an article on company-issued devices and one on personal devices),
embedded by the model a new Japanese collection gets (multilingual e5):

* probation: the whole article on pay during probation comes back, so the
  LLM also sees when it is paid;
* anti-virus on a personal phone (narrow): the budget mode ends at the
  personal-device article, not the chapter around it;
* all rules for personal devices (broad): auto-merge merges that article
  whole and first, not the chapter around it (with the company-device
  article).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_postgresql.executors import NoopExecutor

from hrag_pg.api import HRAG
from hrag_pg.models import RetrievalResult
from tests.conftest import TEMPLATE_DB, create_database, drop_database, url_for

pytestmark = pytest.mark.model

REGULATIONS = Path(__file__).resolve().parents[2] / "bench" / "corpora" / "regulations-ja"
PROBATION = "試用期間中でも住宅手当はもらえますか？"
ANTIVIRUS = "私物のスマホを仕事に使う場合、ウイルス対策はどうすればいいですか？"
ALL_RULES = "私物端末を業務で使うときに守ることを全部教えて"
PERSONAL = "第7条（私物端末の業務利用）"


@pytest.fixture(scope="module")
def hrag(hrag_pg_proc: NoopExecutor) -> Iterator[HRAG]:
    create_database(hrag_pg_proc, "hrag_seed_new_documents", template=TEMPLATE_DB)
    instance = HRAG(url_for(hrag_pg_proc, "hrag_seed_new_documents"))
    instance.ingest([REGULATIONS / "07-joho-system-riyou.md", REGULATIONS / "08-chingin.md"], collection="rules")
    yield instance
    from hrag_pg import db

    db._engine_for.cache_clear()
    drop_database(hrag_pg_proc, "hrag_seed_new_documents")


def _titles(results: list[RetrievalResult]) -> list[str | None]:
    return [r.title or r.heading_path[-1] for r in results]


@pytest.mark.parametrize("mode", ["parent_child", "retrieve"])
def test_the_probation_question_gets_its_whole_article_with_the_pay_day(hrag: HRAG, mode: str) -> None:
    top = getattr(hrag, mode)(PROBATION, collection="rules")[0]
    assert top.title == "第13条（試用期間中の賃金）"
    assert "本採用" in top.content and "支払日" in top.content


def test_the_narrow_antivirus_question_ends_at_the_personal_device_article(hrag: HRAG) -> None:
    results = hrag.retrieve(ANTIVIRUS, collection="rules")
    assert results[0].title == PERSONAL and "マルウェア対策" in results[0].content
    assert not any(r.kind in ("chapter", "document") for r in results), _titles(results)
    assert sum(r.token_count for r in results) < 400


def test_all_personal_device_rules_merge_into_their_article_and_no_further(hrag: HRAG) -> None:
    results = hrag.auto_merge(ALL_RULES, collection="rules")
    article = results[0]
    assert article.title == PERSONAL and article.hit_ratio == 1.0
    assert not any(r.kind in ("chapter", "document") for r in results), _titles(results)
