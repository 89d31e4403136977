"""Auto mode from Python, async, the CLI and both adapters; and the budget rule for parent-child/auto-merge."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrag_pg import cli, defaults
from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUESTION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
BROAD = "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください"


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest([FIXTURES / "work_rules_ja.md", FIXTURES / "security_policy_ja.md"], metadata={"lang": "ja"})
    return h


def overlaps(a: list[str], b: list[str]) -> bool:
    return a[:len(b)] == b or b[:len(a)] == a


@pytest.mark.parametrize("budget", [60, 200, 800])
def test_auto_mode_fits_the_budget_without_overlap_and_cites(hrag: HRAG, budget: int) -> None:
    results = hrag.retrieve(BROAD, max_tokens=budget)
    assert results, "never nothing while a hit exists"
    assert sum(r.token_count for r in results) <= budget
    assert all(r.mode == "auto" and r.reason and r.source == "security_policy_ja.md" for r in results)
    assert all(r.document_metadata["lang"] == "ja" for r in results)
    ids = [r.node_id for r in results]
    assert len(ids) == len(set(ids))


def test_auto_context_and_async_retrieve_equal_the_sync_results(hrag: HRAG) -> None:
    sync = hrag.retrieve(QUESTION, max_tokens=300)
    context = hrag.context(QUESTION, BudgetSettings(max_tokens=300))
    assert [r.node_id for r in context.results] == [r.node_id for r in sync]
    assert context.total_tokens == sum(r.token_count for r in sync) <= 300 and not context.dropped

    async def both() -> list:
        async with AsyncHRAG(hrag) as ahrag:
            return list(await asyncio.gather(ahrag.retrieve(QUESTION, max_tokens=300),
                                             ahrag.context(QUESTION, BudgetSettings(max_tokens=300))))

    got, got_context = asyncio.run(both())
    assert [r.model_dump() for r in got] == [r.model_dump() for r in sync]
    assert got_context.model_dump() == context.model_dump()


def test_auto_retriever_defaults_come_from_the_defaults_module(hrag: HRAG) -> None:
    settings = hrag.retriever(BudgetSettings()).settings
    assert (settings.max_tokens, settings.top_k) == (defaults.MAX_TOKENS, defaults.AUTO_TOP_K)


def test_cli_query_runs_the_budget_mode_by_default_and_with_a_budget(hrag: HRAG, db_url: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli.core, "open_hrag", lambda model=None: hrag)
    runner = CliRunner()
    env = {"HRAG_DATABASE_URL": db_url, "HRAG_DATA_DIR": str(tmp_path)}
    out = runner.invoke(cli.app, ["query", QUESTION, "--max-tokens", "300", "--json"], env=env)
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert payload["mode"] == "auto" and payload["results"]
    assert all(r["mode"] == "auto" and r["reason"] and r["source"] for r in payload["results"])
    assert payload["total_tokens"] <= 300
    plain = json.loads(runner.invoke(cli.app, ["query", QUESTION, "--json"], env=env).stdout)
    assert plain["mode"] == "auto" and plain["max_tokens"] == defaults.MAX_TOKENS, "the budget mode by default"
    assert plain["total_tokens"] <= defaults.MAX_TOKENS
    human = runner.invoke(cli.app, ["query", QUESTION, "--mode", "auto", "--max-tokens", "300"], env=env)
    assert human.exit_code == 0 and "work_rules_ja.md" in human.output


@pytest.mark.parametrize("mode", [ParentChildSettings, AutoMergeSettings])
def test_a_passage_over_the_budget_is_replaced_by_its_best_part_that_fits(hrag: HRAG, mode: type) -> None:
    # (auto-merge without its floor: twelve hits merge into a passage large enough to need a part)
    settings = {"max_parents": 2} if mode is ParentChildSettings else {"top_k": 12, "min_relative_score": None}
    unbounded = hrag.context(QUESTION, mode(collection="default", **settings)).results
    counter = hrag.embedder.token_counter
    best = unbounded[0]
    size = counter.count(best.content)
    budget = max(size // 2, 20)
    assert size > budget, "the best passage must not fit for this test to mean anything"
    context = hrag.context(QUESTION, mode(collection="default", max_tokens=budget, **settings))
    assert context.total_tokens <= budget
    assert best.node_id in {r.node_id for r in context.dropped}
    parts = [r for r in context.results
             if r.reason and "fits the budget" in r.reason and r.document_id == best.document_id]
    assert parts, "the best passage was replaced, not silently dropped"
    for part in parts:
        assert part.content in best.content and overlaps(part.heading_path, best.heading_path)
        assert part.score == best.score and part.mode == best.mode and part.source == best.source
    assert context.results[0].score == best.score, "its replacement comes first, before worse passages"


def test_the_part_that_replaces_a_parent_holds_its_best_hit_not_its_smallest_paragraphs(db_url: str) -> None:
    # A NEWS file: one section of many short items, the one that answers among them.
    fillers = [f"{chr(97 + i % 26)}. Fixed a bug in the {word} builtin that made it print the wrong status."
               for i, word in enumerate(["read", "printf", "test", "echo", "trap", "wait", "kill", "exec",
                                         "cd", "pwd", "type", "hash", "umask", "ulimit", "shift", "set"])]
    short = [f"{chr(98 + i)}. Cleanups." for i in range(6)]
    answer = "aa. The new globskipdots shell option makes pathname expansion never return . and .. as matches."
    items = fillers[:8] + short[:3] + [answer] + short[3:] + fillers[8:]
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_text("# NEWS\n\n## Changes in bash-5.2\n\n" + "\n\n".join(items) + "\n", source="NEWS",
                     collection="news")
    question = "What does the globskipdots shell option do?"
    [parent] = hrag.parent_child(question, ParentChildSettings(max_parents=1), collection="news")
    assert answer in parent.content and hrag.embedder.token_counter.count(parent.content) > 60
    context = hrag.context(question, ParentChildSettings(collection="news", max_parents=1, max_tokens=60))
    assert context.results and context.total_tokens <= 60
    assert any(answer in r.content for r in context.results), [r.content for r in context.results]


@pytest.mark.parametrize("mode", [ParentChildSettings, AutoMergeSettings])
def test_a_context_under_a_budget_is_one_round_trip_whether_or_not_a_passage_is_replaced(
        hrag: HRAG, mode: type) -> None:
    calls: list[str] = []
    original = hrag.repository.fetch

    def counting(sql: str, params: dict) -> list:
        calls.append(sql)
        return original(sql, params)

    settings = {"max_parents": 1} if mode is ParentChildSettings else {"top_k": 12}
    hrag.repository.fetch = counting  # type: ignore[method-assign]
    try:
        roomy = hrag.context(QUESTION, mode(collection="default", max_tokens=100_000, **settings))
        assert len(calls) == 1 and not roomy.dropped
        calls.clear()
        tight = hrag.context(QUESTION, mode(collection="default", max_tokens=20, **settings))
        assert tight.dropped and tight.total_tokens <= 20
        assert len(calls) == 1 and "_fit_budget" in calls[0], calls
    finally:
        del hrag.repository.fetch


def test_both_adapters_offer_auto_mode(hrag: HRAG) -> None:
    from hrag_pg.integrations.langchain import HRAGRetriever as LangChainRetriever
    from hrag_pg.integrations.llama_index import HRAGRetriever as LlamaRetriever

    docs = LangChainRetriever(hrag=hrag, mode="auto", max_tokens=300, filter={"lang": "ja"}).invoke(QUESTION)
    nodes = LlamaRetriever(hrag, mode="auto", max_tokens=300).retrieve(QUESTION)
    assert docs and [d.metadata["node_id"] for d in docs] == [n.node.node_id for n in nodes]
    assert all(d.metadata["mode"] == "auto" and d.metadata["source"] for d in docs)
    assert sum(d.metadata["token_count"] for d in docs) <= 300


class _LongerFirst:
    """A reranker on another scale than the candidate stage (the text's length in characters)."""

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [float(len(t)) for t in texts]


@pytest.mark.parametrize("mode", [ParentChildSettings, AutoMergeSettings])
def test_a_reranked_context_is_fitted_in_the_statement_that_builds_it(hrag: HRAG, mode: type) -> None:
    """Candidates, then results and fitting: two statements, whatever is replaced, never over the budget."""
    calls: list[str] = []
    original = hrag.repository.fetch

    def counting(sql: str, params: dict) -> list:
        calls.append(sql)
        return original(sql, params)

    settings = {"max_parents": 1} if mode is ParentChildSettings else {"top_k": 12}
    best = hrag.retriever(mode(collection="default", reranker=_LongerFirst(), **settings)).retrieve(QUESTION)[0]
    budget = max(best.token_count // 2, 20)
    hrag.repository.fetch = counting  # type: ignore[method-assign]
    try:
        context = hrag.context(QUESTION, mode(collection="default", reranker=_LongerFirst(), max_tokens=budget,
                                              **settings))
    finally:
        del hrag.repository.fetch
    assert len(calls) == 2 and "_fit_budget" in calls[1], calls
    assert context.total_tokens <= budget and best.node_id in {r.node_id for r in context.dropped}
    assert any(r.reason and "fits the budget" in r.reason for r in context.results)
