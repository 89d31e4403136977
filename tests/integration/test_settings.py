"""One settings object per mode: the same object means the same retrieval in every entry point."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.integrations.langchain import HRAGRetriever as LangChainRetriever
from hrag_pg.integrations.llama_index import HRAGRetriever as LlamaIndexRetriever
from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings, Settings, for_mode
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUESTION = "私物端末を業務で使う場合の義務"

#: Every mode with settings away from its defaults, so a setting dropped on the way shows.
TUNED: list[Settings] = [
    ParentChildSettings(top_k_children=6, max_parents=2, lexical_weight=0.5),
    ParentChildSettings(max_parents=3, max_tokens=150, lexical_weight=0),
    AutoMergeSettings(top_k=5, merge_threshold=0.4, max_hit_share=None),
    AutoMergeSettings(top_k=8, max_tokens=120, min_relative_score=0.5),
    BudgetSettings(max_tokens=300, top_k=10),
]
FACADE_METHODS = {ParentChildSettings: "parent_child", AutoMergeSettings: "auto_merge", BudgetSettings: "retrieve"}


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest([FIXTURES / "security_policy_ja.md", FIXTURES / "work_rules_ja.md"])
    return h


def _ids(results: list) -> list[tuple[str, float]]:
    return [(str(r.node_id), round(r.score, 6)) for r in results]


@pytest.mark.parametrize("settings", TUNED, ids=lambda s: f"{s.mode}-{s.max_tokens}")
def test_sync_and_async_facades_take_the_same_settings_and_answer_alike(hrag: HRAG, settings: Settings) -> None:
    method = FACADE_METHODS[type(settings)]
    sync = getattr(hrag, method)(QUESTION, settings)
    sync_context = hrag.context(QUESTION, settings)

    async def both() -> tuple[list, object]:
        async with AsyncHRAG(hrag) as ahrag:
            return await getattr(ahrag, method)(QUESTION, settings), await ahrag.context(QUESTION, settings)

    got, got_context = asyncio.run(both())
    assert sync, "the settings find something"
    assert [r.model_dump() for r in got] == [r.model_dump() for r in sync]
    assert got_context.model_dump() == sync_context.model_dump()  # type: ignore[attr-defined]
    if settings.max_tokens is not None:
        assert sync_context.total_tokens <= settings.max_tokens
        assert _ids(sync) == _ids(sync_context.results), "with a budget, the shortcut answers the context"


def test_the_sync_and_async_facades_have_the_same_retrieval_signatures() -> None:
    for name in ("parent_child", "auto_merge", "retrieve", "context", "retriever"):
        sync, asynchronous = inspect.signature(getattr(HRAG, name)), inspect.signature(getattr(AsyncHRAG, name))
        assert sync.parameters.keys() == asynchronous.parameters.keys(), name
        assert [p.annotation for p in sync.parameters.values()] == \
            [p.annotation for p in asynchronous.parameters.values()], name


@pytest.mark.parametrize("settings", TUNED, ids=lambda s: f"{s.mode}-{s.max_tokens}")
def test_both_adapters_answer_as_the_facade_for_the_same_settings(hrag: HRAG, settings: Settings) -> None:
    expected = _ids(hrag.retriever(settings).retrieve(QUESTION))
    langchain = LangChainRetriever(hrag=hrag, settings=settings).invoke(QUESTION)
    llama = LlamaIndexRetriever(hrag, settings=settings).retrieve(QUESTION)
    assert [(d.metadata["node_id"], round(d.metadata["score"], 6)) for d in langchain] == expected
    assert [(n.node.node_id, round(n.score or 0, 6)) for n in llama] == expected


def test_an_adapters_mode_and_flat_settings_are_the_settings_object_by_another_name(hrag: HRAG) -> None:
    flat = LangChainRetriever(hrag=hrag, mode="auto-merge", top_k=5, merge_threshold=0.4).invoke(QUESTION)
    settings = AutoMergeSettings(top_k=5, merge_threshold=0.4)
    assert [d.metadata["node_id"] for d in flat] == [str(r.node_id) for r in hrag.auto_merge(QUESTION, settings)]


def test_an_adapter_refuses_settings_of_one_mode_with_another_mode_or_beside_flat_settings(hrag: HRAG) -> None:
    with pytest.raises(ValueError, match="does not match the settings given"):
        LlamaIndexRetriever(hrag, mode="auto", settings=ParentChildSettings())
    with pytest.raises(ValueError, match="either as settings= or as parameters"):
        LlamaIndexRetriever(hrag, settings=ParentChildSettings(), max_parents=2)


def test_flat_names_map_to_the_modes_settings_and_another_modes_setting_is_refused_by_name() -> None:
    assert for_mode("parent-child", top_k=7) == ParentChildSettings(top_k_children=7)
    assert for_mode("auto-merge", top_k=7, collection="c") == AutoMergeSettings(top_k=7, collection="c")
    assert for_mode("auto", max_tokens=500) == BudgetSettings(max_tokens=500)
    with pytest.raises(TypeError, match="max_parents is a setting of parent-child, not of mode auto-merge"):
        for_mode("auto-merge", max_parents=2)
    with pytest.raises(TypeError, match="merge_threshold is a setting of auto-merge, not of mode auto"):
        for_mode("auto", merge_threshold=0.5)
    with pytest.raises(TypeError, match="top_kk is not a retrieval setting"):
        for_mode("parent-child", top_kk=3)
    with pytest.raises(ValueError, match="mode must be one of parent-child, auto-merge, auto, got 'bm25'"):
        for_mode("bm25")


def test_a_facade_shortcut_refuses_a_setting_it_does_not_take(hrag: HRAG) -> None:
    with pytest.raises(TypeError, match="max_parents"):
        hrag.auto_merge(QUESTION, max_parents=2)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="the budget mode needs max_tokens"):
        hrag.retrieve(QUESTION, max_tokens=None)


def test_a_facade_method_refuses_the_settings_of_another_mode(hrag: HRAG) -> None:
    with pytest.raises(TypeError, match=r"parent_child takes ParentChildSettings .* got AutoMergeSettings"):
        hrag.parent_child(QUESTION, AutoMergeSettings())  # type: ignore[arg-type]

    async def asynchronous() -> None:
        async with AsyncHRAG(hrag) as ahrag:
            await ahrag.retrieve(QUESTION, ParentChildSettings())  # type: ignore[arg-type]

    with pytest.raises(TypeError, match="retrieve takes BudgetSettings"):
        asyncio.run(asynchronous())
