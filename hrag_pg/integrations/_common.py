"""What both adapters share, framework-free: settings → retriever, result → metadata, documents → items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import IngestError
from ..models import RetrievalResult
from ..retrievers import BaseRetriever, retriever_for

if TYPE_CHECKING:  # pragma: no cover
    from ..api import HRAG

#: Metadata keys hrag adds to every retrieved document (they win over the document's own keys).
RESULT_KEYS = ("node_id", "document_id", "source", "title", "heading_path", "score", "depth", "kind",
               "matched_children", "merged_from", "hit_ratio", "mode", "rank", "token_count")
#: Keys an LLM prompt does not need (ids and bookkeeping, and how the file was read: its local
#: path is no business of the LLM's); LlamaIndex hides them from the LLM.
BOOKKEEPING_KEYS = ("node_id", "document_id", "matched_children", "merged_from", "hit_ratio", "score", "depth",
                    "kind", "mode", "rank", "token_count", "file_path", "strategy", "file_type")


def facade(hrag: Any) -> HRAG:
    """The sync facade behind an ``HRAG`` or an ``AsyncHRAG``."""
    from ..api import HRAG, AsyncHRAG

    if isinstance(hrag, AsyncHRAG):
        return hrag.hrag
    if isinstance(hrag, HRAG):
        return hrag
    raise TypeError(f"hrag must be an HRAG or AsyncHRAG instance, got {type(hrag).__name__}")


def build_retriever(hrag: Any, mode: str, *, collection: str | None, filter: dict[str, Any] | None,
                    max_tokens: int | None, params: Mapping[str, Any]) -> BaseRetriever:
    """The hrag retriever for an adapter's fields (unknown parameters fail here, by name)."""
    return retriever_for(facade(hrag), mode, collection=collection, filter=filter, max_tokens=max_tokens,
                         **dict(params))


def result_metadata(result: RetrievalResult) -> dict[str, Any]:
    """The document's own metadata, then hrag's keys (JSON-friendly: ids as strings)."""
    out: dict[str, Any] = dict(result.document_metadata)
    out.update({
        "node_id": str(result.node_id),
        "document_id": str(result.document_id),
        "source": result.source,
        "title": result.title,
        "heading_path": list(result.heading_path),
        "score": float(result.score),
        "depth": result.depth,
        "kind": result.kind,
        "hit_ratio": result.hit_ratio,
        "mode": result.mode,
        "rank": result.rank,
        "token_count": result.token_count,
    })
    if result.matched_children is not None:
        out["matched_children"] = [str(i) for i in result.matched_children]
    if result.merged_from is not None:
        out["merged_from"] = [str(i) for i in result.merged_from]
    return out


def document_source(index: int, metadata: Mapping[str, Any], doc_id: str | None,
                    keys: tuple[str, ...] = ("source",)) -> str:
    """A framework document's source name: the first of ``keys`` in its metadata, else its id."""
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value
    if doc_id:
        return str(doc_id)
    raise IngestError(
        f"document {index} has no source: set metadata['source'] (or its id) so re-ingesting it updates "
        "the same document instead of adding a copy"
    )
