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

from ..api import IngestReport
from ..models import RetrievalResult
from ..retrievers import BaseRetriever as HragRetriever
from ..settings import Settings
from .adapter_support import build_retriever, document_source, facade, result_metadata

__all__ = ["HRAGRetriever", "to_document"]


def to_document(result: RetrievalResult) -> Document:
    """One hrag result as a LangChain ``Document`` (id = the node id)."""
    return Document(id=str(result.node_id), page_content=result.content, metadata=result_metadata(result))


class HRAGRetriever(BaseRetriever):
    """Hierarchical retrieval from PostgreSQL as a LangChain retriever.

    The retrieval is described by ``settings`` (a :mod:`hrag_pg.settings`
    object: ``ParentChildSettings``, ``AutoMergeSettings`` or
    ``BudgetSettings``), or by ``mode`` ("parent-child", the default,
    "auto-merge" or "auto", the budget mode) and that mode's settings as
    keywords (``top_k``, ``max_parents``, ``merge_threshold``,
    ``lexical_weight``, ``reranker``, …; a setting of another mode is an
    error).  ``collection``, ``filter`` and ``max_tokens`` (a context
    budget: a result that does not fit is replaced by the part of it that
    does) narrow either.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="allow")

    hrag: Any = Field(description="An hrag_pg.HRAG (or AsyncHRAG).")
    mode: Literal["parent-child", "auto-merge", "auto"] | None = None
    settings: Settings | None = None
    collection: str | None = None
    filter: dict[str, Any] | None = None
    max_tokens: int | None = None

    def model_post_init(self, context: Any, /) -> None:
        facade(self.hrag)  # a wrong object fails at construction, not at the first question
        self._hrag_retriever()

    def _hrag_retriever(self) -> HragRetriever[Any]:
        return build_retriever(self.hrag, self.mode, settings=self.settings, collection=self.collection,
                               filter=self.filter, max_tokens=self.max_tokens, params=self.model_extra or {})

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(r) for r in self._hrag_retriever().retrieve(query)]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        return [to_document(r) for r in await self._hrag_retriever().aretrieve(query)]

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
