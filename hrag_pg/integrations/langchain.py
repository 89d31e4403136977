"""LangChain adapter: :class:`HRAGRetriever`, a real ``langchain_core`` ``BaseRetriever``.

    from hrag_pg import HRAG
    from hrag_pg.integrations.langchain import HRAGRetriever

    retriever = HRAGRetriever(hrag=HRAG.open(), mode="auto-merge", collection="manuals")
    retriever.add_documents(docs)          # LangChain Documents, one source each
    chain = {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | llm

``invoke``/``ainvoke``/``batch`` return ``Document``s whose ``page_content``
is the node's full text (the parent, or the merged section) and whose
metadata holds the document's own metadata plus ``node_id``,
``document_id``, ``source``, ``title``, ``heading_path``, ``score``,
``depth``, ``kind``, ``matched_children`` or ``merged_from``, ``hit_ratio``,
``mode``, ``rank`` and ``token_count``.  ``ainvoke`` runs on hrag's async
connection pool, so concurrent calls do not queue on one connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from .. import defaults
from ..api import IngestReport
from ..models import RetrievalResult
from ..rerank import Reranker
from ..retrievers import BaseRetriever as HragRetriever
from ._common import build_retriever, document_source, facade, result_metadata

__all__ = ["HRAGRetriever", "to_document"]


def to_document(result: RetrievalResult) -> Document:
    """One hrag result as a LangChain ``Document`` (id = the node id)."""
    return Document(id=str(result.node_id), page_content=result.content, metadata=result_metadata(result))


class HRAGRetriever(BaseRetriever):
    """Hierarchical retrieval from PostgreSQL as a LangChain retriever.

    ``mode`` is "parent-child" (small-to-big), "auto-merge" or "auto"
    (budgeted, when the database has it); ``max_tokens`` bounds the context
    (results that do not fit are left out, as ``HRAG.context`` does).  The
    other fields are the retrieval parameters, with the defaults of
    :mod:`hrag_pg.defaults`; ``top_k`` is the children matched
    (parent-child) or the leaves hit (auto-merge).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    hrag: Any = Field(description="An hrag_pg.HRAG (or AsyncHRAG).")
    mode: Literal["parent-child", "auto-merge", "auto"] = "parent-child"
    collection: str | None = None
    filter: dict[str, Any] | None = None
    max_tokens: int | None = None
    top_k: int | None = None
    max_parents: int = defaults.MAX_PARENTS
    min_score: float | None = None
    merge_threshold: float = defaults.MERGE_THRESHOLD
    lexical_weight: float = defaults.LEXICAL_WEIGHT
    candidates: int | None = None
    min_relative_score: float | None = None
    reranker: Reranker | None = None
    rerank_candidates: int = defaults.RERANK_CANDIDATES

    def model_post_init(self, context: Any, /) -> None:
        facade(self.hrag)  # a wrong object fails at construction, not at the first question
        self._hrag_retriever()

    def _hrag_retriever(self) -> HragRetriever:
        params = {"top_k": self.top_k, "max_parents": self.max_parents, "min_score": self.min_score,
                  "merge_threshold": self.merge_threshold, "lexical_weight": self.lexical_weight,
                  "candidates": self.candidates, "min_relative_score": self.min_relative_score,
                  "reranker": self.reranker, "rerank_candidates": self.rerank_candidates}
        return build_retriever(self.hrag, self.mode, collection=self.collection, filter=self.filter,
                               max_tokens=self.max_tokens, params=params)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        retriever = self._hrag_retriever()
        results = retriever.context(query).results if self.max_tokens is not None else retriever.retrieve(query)
        return [to_document(r) for r in results]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        retriever = self._hrag_retriever()
        if self.max_tokens is not None:
            results = (await retriever.acontext(query)).results
        else:
            results = await retriever.aretrieve(query)
        return [to_document(r) for r in results]

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        collection: str | None = None,
        strategy: str | None = None,
        format: Literal["markdown", "text", "html", "rst"] = "markdown",
    ) -> IngestReport:
        """Store LangChain ``Document``s, each one source split by hrag's strategy.

        A document's source is ``metadata["source"]`` (what LangChain's
        loaders set), else its ``id``; its metadata is stored with it and
        ``filter`` matches it.  Every document is checked before any is
        written (see :meth:`hrag_pg.HRAG.ingest_texts`).
        """
        items = [(d.page_content, document_source(i, d.metadata, d.id), dict(d.metadata))
                 for i, d in enumerate(documents)]
        return facade(self.hrag).ingest_texts(items, collection=collection or self.collection or "default",
                                              strategy=strategy, format=format)  # type: ignore[arg-type]
