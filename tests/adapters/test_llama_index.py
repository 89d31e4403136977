"""The LlamaIndex adapter against the real llama-index-core: query engine with MockLLM, async fan-out, filters."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import Document, NodeWithScore, TextNode

from hrag_pg.api import HRAG
from hrag_pg.errors import IngestError
from hrag_pg.integrations.llama_index import HRAGRetriever
from tests.adapters.conftest import (
    GUIDE,
    HANDBOOK,
    MERGE_QUESTION,
    PAY_DAY,
    PC_PARENT,
    PC_QUESTION,
    RULES,
    SECURITY,
)


@pytest.fixture
def loaded(hrag: HRAG) -> HRAG:
    report = HRAGRetriever(hrag).add_documents([
        Document(text=RULES, metadata={"file_path": "rules/work_rules.md", "lang": "ja", "dept": "hr"}),
        Document(text=SECURITY, metadata={"file_name": "security.md", "lang": "ja", "dept": "it"}),
        Document(text=GUIDE, id_="guide", metadata={"lang": "en"}),
        Document(text=HANDBOOK, metadata={"source": "handbook.md", "dept": "ops"}),
    ])
    assert [r.source for r in report.results] == ["rules/work_rules.md", "security.md", "guide", "handbook.md"]
    return hrag


def test_retrieve_returns_text_nodes_with_scores_and_citations(loaded: HRAG) -> None:
    retriever = HRAGRetriever(loaded, mode="parent-child", max_parents=2)
    assert isinstance(retriever, BaseRetriever)
    nodes = retriever.retrieve(PC_QUESTION)
    assert nodes and all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
    top = nodes[0]
    assert PC_PARENT in top.node.metadata["heading_path"] and PAY_DAY in top.node.get_content()
    assert top.node.node_id == top.node.metadata["node_id"] and top.score == top.node.metadata["score"]
    assert top.node.metadata["source"] == "rules/work_rules.md" and top.node.metadata["dept"] == "hr"
    assert top.node.metadata["matched_children"]
    llm_view = top.node.get_content(metadata_mode="llm")
    assert "rules/work_rules.md" in llm_view and top.node.metadata["node_id"] not in llm_view
    assert top.node.metadata["file_path"] and "file_path:" not in llm_view, "a local path is not the LLM's business"


def test_a_query_engine_with_a_mock_llm_answers_from_the_parent(loaded: HRAG) -> None:
    engine = RetrieverQueryEngine.from_args(HRAGRetriever(loaded, max_parents=1, collection="default"),
                                            llm=MockLLM())
    response = engine.query(PC_QUESTION)
    assert PAY_DAY in str(response), "MockLLM echoes its prompt: the whole 第4条 reached it"
    assert response.source_nodes[0].node.metadata["source"] == "rules/work_rules.md"


def test_auto_merge_mode_returns_the_merged_section(loaded: HRAG) -> None:
    nodes = HRAGRetriever(loaded, mode="auto-merge", filter={"dept": "ops"}, top_k=2,
                          merge_threshold=0.6).retrieve(MERGE_QUESTION)
    top = nodes[0].node
    assert top.metadata["heading_path"][-1] == "Backups"
    assert "nightly" in top.get_content() and "AES-256" in top.get_content()
    assert len(top.metadata["merged_from"]) == 2


@pytest.mark.parametrize(("filter_value", "sources"), [
    ({"lang": "en"}, {"guide"}),
    ({"dept": "it"}, {"security.md"}),
    ({"lang": "fr"}, set()),
])
def test_filters_on_user_metadata_select_documents(loaded: HRAG, filter_value: dict, sources: set) -> None:
    nodes = HRAGRetriever(loaded, mode="auto-merge", filter=filter_value).retrieve(PC_QUESTION)
    assert {n.node.metadata["source"] for n in nodes} == sources


async def test_sixteen_concurrent_aretrieve_calls_equal_retrieve(loaded: HRAG) -> None:
    retriever = HRAGRetriever(loaded, mode="parent-child")
    questions = [PC_QUESTION, MERGE_QUESTION, "pgvector extension version", "BYOD"] * 4
    expected = [[n.node.node_id for n in retriever.retrieve(q)] for q in questions]
    got = await asyncio.gather(*(retriever.aretrieve(q) for q in questions))
    assert [[n.node.node_id for n in nodes] for nodes in got] == expected
    await loaded.async_repository.close()


def test_unknown_parameters_fail_at_construction_by_name(hrag: HRAG) -> None:
    with pytest.raises(TypeError, match="top_kk"):
        HRAGRetriever(hrag, top_kk=3)
    with pytest.raises(ValueError, match="mode"):
        HRAGRetriever(hrag, mode="bm25")  # type: ignore[arg-type]


def test_reloading_documents_with_stable_sources_updates_instead_of_copying(loaded: HRAG) -> None:
    report = HRAGRetriever(loaded).add_documents(
        [Document(text=RULES, metadata={"file_path": "rules/work_rules.md", "lang": "ja", "dept": "hr"})])
    assert [r.status for r in report.results] == ["unchanged"]
    assert len(loaded.sources()) == 4


def test_a_document_with_bad_metadata_is_refused_before_anything_is_written(hrag: HRAG) -> None:
    with pytest.raises(IngestError, match="not JSON-serialisable"):
        HRAGRetriever(hrag).add_documents([Document(text=GUIDE, id_="a"),
                                           Document(text=RULES, id_="b", metadata={"x": {1, 2}})])
    assert hrag.sources() == []
