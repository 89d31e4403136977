"""LlamaIndex adapter: :class:`HRAGRetriever`, a real ``llama_index.core`` ``BaseRetriever``.

    from hrag_pg.integrations.llama_index import HRAGRetriever
    from llama_index.core.query_engine import RetrieverQueryEngine

    retriever = HRAGRetriever(hrag=HRAG.open(), mode="auto-merge", collection="manuals")
    retriever.add_documents(documents)     # LlamaIndex Documents, one source each
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm)

``retrieve``/``aretrieve`` return ``NodeWithScore(TextNode)``: the node's full
text, its score, and the same metadata as the LangChain adapter (the
document's own keys plus ``node_id``, ``source``, ``heading_path``,
``matched_children``/``merged_from``, …).  Ids and bookkeeping keys are
hidden from the LLM prompt and from embedding; ``source``, ``title`` and
``heading_path`` stay visible so the model can cite them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode

from ..api import IngestReport
from ..models import RetrievalResult
from ..retrievers import BaseRetriever as HragRetriever
from ..settings import Settings
from .adapter_support import BOOKKEEPING_KEYS, build_retriever, document_source, facade, result_metadata

__all__ = ["HRAGRetriever", "to_node"]

#: Metadata keys LlamaIndex readers use for a document's origin, most specific first.
SOURCE_KEYS = ("source", "file_path", "file_name", "url")


def to_node(result: RetrievalResult) -> NodeWithScore:
    """One hrag result as ``NodeWithScore(TextNode)`` (node id = hrag's node id)."""
    metadata = result_metadata(result)
    node = TextNode(
        id_=str(result.node_id), text=result.content, metadata=metadata,
        excluded_llm_metadata_keys=[k for k in metadata if k in BOOKKEEPING_KEYS],
        excluded_embed_metadata_keys=list(metadata),
    )
    return NodeWithScore(node=node, score=float(result.score))


class HRAGRetriever(BaseRetriever):
    """Hierarchical retrieval from PostgreSQL as a LlamaIndex retriever.

    Takes the same settings as the LangChain adapter: a ``settings`` object,
    or ``mode`` ("parent-child", "auto-merge", "auto") and that mode's
    settings as keywords (``top_k``, ``max_parents``, ``merge_threshold``,
    ``lexical_weight``, ``reranker``, …), narrowed by ``collection``,
    ``filter`` and ``max_tokens``.
    """

    def __init__(
        self,
        hrag: Any,
        mode: Literal["parent-child", "auto-merge", "auto"] | None = None,
        collection: str | None = None,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        *,
        settings: Settings | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **params: Any,
    ) -> None:
        self.hrag = facade(hrag)
        self.mode = mode
        self.settings = settings
        self.collection = collection
        self.filter = filter
        self.max_tokens = max_tokens
        self.params = params
        self._hrag_retriever()  # unknown parameters and modes fail here, by name
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _hrag_retriever(self) -> HragRetriever[Any]:
        return build_retriever(self.hrag, self.mode, settings=self.settings, collection=self.collection,
                               filter=self.filter, max_tokens=self.max_tokens, params=self.params)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(r) for r in self._hrag_retriever().retrieve(query_bundle.query_str)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [to_node(r) for r in await self._hrag_retriever().aretrieve(query_bundle.query_str)]

    def add_documents(
        self,
        documents: Sequence[BaseNode],
        *,
        collection: str | None = None,
        strategy: str | None = None,
        format: Literal["markdown", "text", "html", "rst"] = "markdown",
    ) -> IngestReport:
        """Store LlamaIndex ``Document``s, each one source split by hrag's strategy (hrag builds the tree).

        A document's source is ``metadata["source"]``, ``file_path``,
        ``file_name`` or ``url`` (what the readers set), else its ``id_``
        (random unless you set it: then re-ingesting adds a copy).
        """
        items = [(d.get_content(), document_source(i, d.metadata, d.id_, SOURCE_KEYS), dict(d.metadata))
                 for i, d in enumerate(documents)]
        return self.hrag.ingest_texts(items, collection=collection or self.collection or "default",
                                      strategy=strategy, format=format)  # type: ignore[arg-type]
