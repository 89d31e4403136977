"""The Python API: one SQL call per retrieval, async parity, reranking, context budgets."""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.embedding import default_model_path
from hrag_pg.errors import EmbeddingError
from hrag_pg.rerank import CrossEncoderReranker
from hrag_pg.settings import AutoMergeSettings, ParentChildSettings

pytestmark = pytest.mark.model

QUESTION_JA = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"
QUESTION_EN = "How do I secure a Tidewater deployment with TLS and access control?"


@pytest.mark.parametrize("mode", [ParentChildSettings, AutoMergeSettings])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.5])
def test_each_retrieval_is_one_sql_call(hrag: HRAG, mode: type, lexical_weight: float) -> None:
    hrag.embed_query("warm up", "manual")
    calls: list[str] = []
    original = hrag.repository.fetch

    def counting(sql: str, params: dict) -> list:
        calls.append(sql)
        return original(sql, params)

    hrag.repository.fetch = counting  # type: ignore[method-assign]
    try:
        results = hrag.retriever(mode(collection="manual", lexical_weight=lexical_weight,
                                      min_relative_score=None)).retrieve(QUESTION_EN)
    finally:
        del hrag.repository.fetch
    assert results and len(calls) == 1
    assert ("search_hybrid" in calls[0]) == (lexical_weight > 0)


@pytest.mark.parametrize("mode", ["parent_child", "auto_merge"])
async def test_async_results_equal_sync_results(hrag: HRAG, mode: str) -> None:
    async_hrag = AsyncHRAG(hrag)
    try:
        for question, collection in ((QUESTION_JA, "security"), (QUESTION_EN, "manual")):
            sync_results = getattr(hrag, mode)(question, collection=collection)
            async_results = await getattr(async_hrag, mode)(question, collection=collection)
            assert sync_results, (mode, question)  # (two empty answers would prove nothing)
            assert [r.model_dump() for r in async_results] == [r.model_dump() for r in sync_results]
    finally:
        await async_hrag.close()


def _terms(text: str) -> set[str]:
    """Lower-cased ASCII words plus character bigrams of every other run (Japanese has no spaces)."""
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    runs = re.sub(r"[\sa-zA-Z0-9\W_]+", " ", text).split()
    return words | {run[i:i + 2] for run in runs for i in range(len(run) - 1)}


class LexicalOverlapReranker:
    """A reranker that knows nothing of the expected answers: the share of the question's terms in the text."""

    def __init__(self) -> None:
        self.scored: list[tuple[str, float]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        terms = _terms(query)
        scores = [len(terms & _terms(t)) / len(terms) for t in texts]
        self.scored = list(zip(texts, scores, strict=True))
        return scores

    def best(self, n: int) -> list[str]:
        """The ``n`` best texts, ties in candidate order (as hrag's sort keeps them)."""
        return [t for t, _ in sorted(self.scored, key=lambda ts: -ts[1])[:n]]


def _content(rerank_text: str) -> str:
    return rerank_text.split("] ", 1)[1] if rerank_text.startswith("[") else rerank_text


def test_the_reranker_rescores_children_before_parents_are_chosen(hrag: HRAG) -> None:
    question = "How do I protect my data?"
    reranker = LexicalOverlapReranker()
    results = hrag.parent_child(question, ParentChildSettings(reranker=reranker, max_parents=2), collection="manual")
    plain = hrag.parent_child(question, ParentChildSettings(max_parents=2), collection="manual")
    assert len(reranker.scored) == 50, "the reranker scored the 50 candidate children"
    assert all(t.startswith("[Tidewater Message Queue 4.2 Operations Manual") and "] " in t
               for t, _ in reranker.scored), \
        "children are reranked with their heading path"
    assert [r.heading_path[-1] for r in plain] == ["Storage and Segment Settings", "Snapshot Model"]
    assert [r.heading_path[-1] for r in results] == ["Off-site Copies to Object Storage", "Retention Policies"]
    # The best-scored child is inside the first parent; parents come in the order of their best child.
    assert _content(reranker.best(1)[0]) in results[0].content
    assert results[0].score == max(s for _, s in reranker.scored) and results[0].score > results[1].score


def test_the_reranker_feeds_the_merge(hrag: HRAG) -> None:
    """The merge works on the reranked top 3: three items of 第5条 merge it whole (2 of 3 without reranking)."""
    question = "私物端末の義務"
    reranker = LexicalOverlapReranker()
    results = hrag.auto_merge(question, AutoMergeSettings(reranker=reranker, top_k=3), collection="security")
    plain = hrag.auto_merge(question, AutoMergeSettings(top_k=3), collection="security")
    assert (plain[0].heading_path[-1], len(plain[0].merged_from or [])) == ("第5条（貸与端末）", 2)
    [top] = results
    assert top.heading_path[-1] == "第5条（貸与端末）" and top.hit_ratio == pytest.approx(1.0)
    merged = {n.content for n in hrag.repository.children(top.node_id) if n.id in top.merged_from}
    assert merged == {_content(t) for t in reranker.best(3)}, "merged exactly the reranker's top 3 children"


def test_context_budget_keeps_whole_results_by_score_and_reports_the_rest(hrag: HRAG) -> None:
    context = hrag.context(QUESTION_EN, ParentChildSettings(collection="manual", max_parents=4, max_tokens=700))
    # 325 + 356 tokens fit in 700; the next two (317, 101) would each overflow and are replaced by
    # their best part that fits (issue 10's budget rule), if any part does.
    whole = [r for r in context.results if not (r.reason and "fits the budget" in r.reason)]
    assert [r.heading_path[-1] for r in whole] == ["TLS Encryption", "Access Control Lists"]
    assert [r.heading_path[-1] for r in context.dropped] == ["Hardening Checklist", "Mutual TLS"]
    assert context.total_tokens == sum(r.token_count for r in context.results) <= 700
    assert all(context.total_tokens + r.token_count > 700 for r in context.dropped)
    unbounded = {r.node_id: r for r in hrag.parent_child(QUESTION_EN, collection="manual")}
    for r in context.results:
        if r.node_id in unbounded:
            assert r.content == unbounded[r.node_id].content, "a kept result is never cut"
        else:  # a passage over the budget, replaced by its best part that fits (whole nodes, never cut)
            assert r.reason and "fits the budget" in r.reason
            assert any(r.content in d.content for d in context.dropped)
    kept_scores = [r.score for r in context.results]
    assert kept_scores == sorted(kept_scores, reverse=True)


def test_cross_encoder_reranker_loads_from_a_local_folder() -> None:
    # No cross-encoder weights ship offline; a BERT folder (the bundled MiniLM)
    # loads as a CrossEncoder with a fresh scoring head, which exercises the loader.
    reranker = CrossEncoderReranker(default_model_path())
    scores = reranker.score("question", ["a passage", "another passage"])
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    # The loaded model really scores the pairs: deterministic, and different texts score differently.
    assert reranker.score("question", ["a passage", "another passage"]) == scores
    assert scores[0] != scores[1]


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
