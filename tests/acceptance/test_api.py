"""The Python API: one SQL call per retrieval, async parity, reranking, context budgets."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from hrag_pg import context as context_module
from hrag_pg.api import HRAG, AsyncHRAG, AutoMergingRetriever, ParentChildRetriever
from hrag_pg.embedding import default_model_path
from hrag_pg.errors import EmbeddingError
from hrag_pg.rerank import CrossEncoderReranker

pytestmark = pytest.mark.model

QUESTION_JA = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"
QUESTION_EN = "How do I secure a Tidewater deployment with TLS and access control?"


@pytest.mark.parametrize("retriever", [ParentChildRetriever, AutoMergingRetriever])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.5])
def test_each_retrieval_is_one_sql_call(hrag: HRAG, retriever: type, lexical_weight: float) -> None:
    hrag.embed_query("warm up")
    calls: list[str] = []
    original = hrag.repository._fetch

    def counting(sql: str, params: dict) -> list:
        calls.append(sql)
        return original(sql, params)

    hrag.repository._fetch = counting  # type: ignore[method-assign]
    try:
        results = retriever(hrag, collection="manual", lexical_weight=lexical_weight,
                            min_relative_score=None).retrieve(QUESTION_EN)
    finally:
        del hrag.repository._fetch
    assert results and len(calls) == 1
    assert ("search_hybrid" in calls[0]) == (lexical_weight > 0)


@pytest.mark.parametrize("mode", ["parent_child", "auto_merge"])
async def test_async_results_equal_sync_results(hrag: HRAG, mode: str) -> None:
    async_hrag = AsyncHRAG(hrag)
    try:
        for question, collection in ((QUESTION_JA, "security"), (QUESTION_EN, "manual")):
            sync_results = getattr(hrag, mode)(question, collection=collection)
            async_results = await getattr(async_hrag, mode)(question, collection=collection)
            assert [r.model_dump() for r in async_results] == [r.model_dump() for r in sync_results]
    finally:
        await async_hrag.close()


class KeywordReranker:
    """Deterministic reranker for tests: scores by how often a keyword occurs."""

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword
        self.seen: list[str] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.seen.extend(texts)
        return [float(t.count(self.keyword)) + 1.0 / (1 + len(t)) for t in texts]


def test_the_reranker_rescores_children_before_parents_are_chosen(hrag: HRAG) -> None:
    reranker = KeywordReranker("snapshot")
    results = ParentChildRetriever(hrag, collection="manual", reranker=reranker, max_parents=2).retrieve(
        "How do I protect my data?")
    assert reranker.seen, "the reranker saw the candidate children"
    assert all("[" in t for t in reranker.seen), "children are reranked with their heading path"
    assert all("snapshot" in r.content.lower() for r in results)
    assert results[0].score >= results[-1].score


def test_the_reranker_feeds_the_merge(hrag: HRAG) -> None:
    reranker = KeywordReranker("BYOD端末")
    results = AutoMergingRetriever(hrag, collection="security", reranker=reranker, top_k=3).retrieve(
        "端末の取り扱いについて")
    assert results[0].title == "第8条（BYOD）" and results[0].hit_ratio == pytest.approx(1.0)


def test_context_budget_keeps_whole_results_by_score_and_reports_the_rest(hrag: HRAG) -> None:
    retriever = ParentChildRetriever(hrag, collection="manual", max_parents=4, max_context_tokens=700)
    context = retriever.context(QUESTION_EN)
    assert context.total_tokens <= 700
    assert context.dropped, "something did not fit"
    unbounded = {r.node_id: r for r in ParentChildRetriever(hrag, collection="manual").retrieve(QUESTION_EN)}
    for r in context.results:
        if r.node_id in unbounded:
            assert r.content == unbounded[r.node_id].content, "a kept result is never cut"
        else:  # a passage over the budget, replaced by its best part that fits (whole nodes, never cut)
            assert r.reason and "fits the budget" in r.reason
            assert any(r.content in d.content for d in context.dropped)
    kept_scores = [r.score for r in context.results]
    assert kept_scores == sorted(kept_scores, reverse=True)


def test_greedy_budget_skips_a_big_result_but_keeps_smaller_later_ones(hrag: HRAG) -> None:
    results = ParentChildRetriever(hrag, collection="manual", max_parents=4).retrieve(QUESTION_EN)
    counter = hrag.embedder.token_counter
    sizes = [counter.count(r.content) for r in results]
    budget = sizes[0] + min(sizes[1:]) if len(sizes) > 1 else sizes[0]
    context = context_module.assemble(results, budget, counter)
    assert context.results[0].node_id == results[0].node_id
    assert context.total_tokens <= budget


def test_cross_encoder_reranker_loads_from_a_local_folder() -> None:
    # No cross-encoder weights ship offline; a BERT folder (the bundled MiniLM)
    # loads as a CrossEncoder with a fresh scoring head, which exercises the loader.
    reranker = CrossEncoderReranker(default_model_path())
    scores = reranker.score("question", ["a passage", "another passage"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)


def test_a_missing_cross_encoder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(EmbeddingError, match="Cannot load cross-encoder"):
        CrossEncoderReranker(str(tmp_path / "no-such-model"))


@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_question_is_refused(hrag: HRAG, question: str) -> None:
    with pytest.raises(ValueError, match="question is empty"):
        hrag.parent_child(question)


def test_a_megabyte_question_is_refused_with_the_limit(hrag: HRAG) -> None:
    with pytest.raises(ValueError, match="limit is 10,000"):
        hrag.auto_merge("x" * 1_000_000)
