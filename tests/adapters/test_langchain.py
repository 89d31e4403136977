"""The LangChain adapter against the real langchain-core: LCEL chain, async fan-out, filters, loading."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from hrag_pg.api import HRAG
from hrag_pg.errors import IngestError
from hrag_pg.integrations.langchain import HRAGRetriever
from tests.adapters.conftest import (
    AM_QUESTION,
    GUIDE,
    HANDBOOK,
    MERGE_QUESTION,
    PAY_DAY,
    PC_PARENT,
    PC_QUESTION,
    RULES,
    SECURITY,
)

EXPECTED_KEYS = {"node_id", "document_id", "source", "title", "heading_path", "score", "depth", "kind",
                 "hit_ratio", "lang"}


@pytest.fixture
def loaded(hrag: HRAG) -> HRAG:
    report = HRAGRetriever(hrag=hrag).add_documents([
        Document(page_content=RULES, metadata={"source": "rules/work_rules.md", "lang": "ja", "dept": "hr"}),
        Document(page_content=SECURITY, metadata={"source": "rules/security.md", "lang": "ja", "dept": "it"}),
        Document(page_content=GUIDE, id="guide", metadata={"lang": "en"}),
    ])
    assert [r.status for r in report.results] == ["created"] * 3
    return hrag


def test_the_retriever_is_a_real_langchain_retriever(loaded: HRAG) -> None:
    retriever = HRAGRetriever(hrag=loaded, mode="parent-child", max_parents=2)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(PC_QUESTION)
    assert docs and isinstance(docs[0], Document)
    top = docs[0]
    assert PC_PARENT in top.metadata["heading_path"] and PAY_DAY in top.page_content
    assert EXPECTED_KEYS | {"matched_children"} <= set(top.metadata)
    assert top.metadata["source"] == "rules/work_rules.md" and top.metadata["dept"] == "hr"
    assert top.id == top.metadata["node_id"]
    assert [d.metadata["node_id"] for d in retriever.batch([PC_QUESTION, PC_QUESTION])[1]] == \
        [d.metadata["node_id"] for d in docs]


def test_an_lcel_chain_with_a_fake_llm_gets_the_parent_in_its_prompt(loaded: HRAG) -> None:
    retriever = HRAGRetriever(hrag=loaded, mode="parent-child", collection="default", max_parents=1)
    prompts: list[str] = []

    def spy(prompt_value: object) -> object:
        prompts.append(str(prompt_value))
        return prompt_value

    prompt = PromptTemplate.from_template("Answer from the context.\n{context}\n\nQuestion: {question}")
    llm = FakeListLLM(responses=["昼食手当は本採用以降です。"])

    def format_docs(docs: list[Document]) -> str:
        return "\n\n".join(f"[{d.metadata['source']} › {' › '.join(d.metadata['heading_path'])}]\n{d.page_content}"
                           for d in docs)

    chain = RunnableParallel(docs=retriever, question=RunnablePassthrough()).assign(
        answer=RunnableLambda(lambda x: {"context": format_docs(x["docs"]), "question": x["question"]})
        | prompt | RunnableLambda(spy) | llm | StrOutputParser())
    out = chain.invoke(PC_QUESTION)
    assert out["answer"] == "昼食手当は本採用以降です。"
    assert PC_PARENT in out["docs"][0].metadata["heading_path"]
    assert PAY_DAY in prompts[0] and "rules/work_rules.md" in prompts[0], "the whole parent, cited, reached the LLM"


def test_auto_merge_mode_returns_the_merged_section_and_explains_it(loaded: HRAG) -> None:
    HRAGRetriever(hrag=loaded).add_documents(
        [Document(page_content=HANDBOOK, metadata={"source": "handbook.md", "dept": "ops"})])
    retriever = HRAGRetriever(hrag=loaded, mode="auto-merge", filter={"dept": "ops"}, top_k=2,
                              merge_threshold=0.6)
    docs = retriever.invoke(MERGE_QUESTION)
    top = docs[0]
    assert top.metadata["heading_path"][-1] == "Backups", [d.metadata["heading_path"] for d in docs]
    assert "nightly" in top.page_content and "AES-256" in top.page_content, "the section's whole text"
    assert len(top.metadata["merged_from"]) == 2 and top.metadata["hit_ratio"] == 1.0
    assert "matched_children" not in top.metadata
    assert {d.metadata["source"] for d in docs} == {"handbook.md"}


@pytest.mark.parametrize(("filter_value", "sources"), [
    ({"lang": "en"}, {"guide"}),
    ({"dept": "hr"}, {"rules/work_rules.md"}),
    ({"lang": "fr"}, set()),
])
def test_filters_on_user_metadata_select_documents(loaded: HRAG, filter_value: dict, sources: set) -> None:
    docs = HRAGRetriever(hrag=loaded, mode="auto-merge", filter=filter_value).invoke(PC_QUESTION)
    assert {d.metadata["source"] for d in docs} == sources


def test_a_budget_keeps_the_context_within_max_tokens(loaded: HRAG) -> None:
    docs = HRAGRetriever(hrag=loaded, max_tokens=400, collection="default").invoke(PC_QUESTION)
    assert sum(d.metadata["token_count"] for d in docs) <= 400


async def test_sixteen_concurrent_ainvoke_calls_equal_invoke(loaded: HRAG) -> None:
    retriever = HRAGRetriever(hrag=loaded, mode="auto-merge")
    questions = [PC_QUESTION, AM_QUESTION, "pgvector extension version", "merge threshold"] * 4
    expected = [[d.metadata["node_id"] for d in retriever.invoke(q)] for q in questions]
    got = await asyncio.gather(*(retriever.ainvoke(q) for q in questions))
    assert [[d.metadata["node_id"] for d in docs] for docs in got] == expected
    await loaded.async_repository.close()


def test_unknown_modes_and_wrong_objects_fail_at_construction(hrag: HRAG) -> None:
    with pytest.raises(ValueError, match="mode"):
        HRAGRetriever(hrag=hrag, mode="bm25")  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError)):
        HRAGRetriever(hrag=object())


def test_documents_without_a_source_are_refused_before_anything_is_written(hrag: HRAG) -> None:
    with pytest.raises(IngestError, match="document 1 has no source"):
        HRAGRetriever(hrag=hrag).add_documents([Document(page_content=GUIDE, metadata={"source": "a"}),
                                                Document(page_content=RULES)])
    assert hrag.sources() == []


def test_the_core_imports_neither_framework() -> None:
    import subprocess
    import sys

    code = ("import sys, hrag_pg, hrag_pg.api, hrag_pg.cli, hrag_pg.retrievers, hrag_pg.integrations; "
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain_core', 'llama_index')); "
            "assert not loaded, loaded")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
