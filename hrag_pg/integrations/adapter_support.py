"""What both adapters share, framework-free: settings → retriever, result → metadata, documents → items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import IngestError
from ..models import RetrievalResult
from ..operations.shapes import passage_fields
from ..retrievers import BaseRetriever
from ..settings import Settings, for_mode, scoped

if TYPE_CHECKING:  # pragma: no cover
    from ..api import HRAG

#: Metadata keys hrag adds to every retrieved document (they win over the document's own keys).
RESULT_KEYS = ("node_id", "document_id", "source", "title", "heading_path", "score", "depth", "kind",
               "matched_children", "merged_from", "hit_ratio", "mode", "rank", "token_count", "reason")
#: Keys an LLM prompt does not need (ids and bookkeeping, and how the file was read: its local
#: path is no business of the LLM's); LlamaIndex hides them from the LLM.
BOOKKEEPING_KEYS = ("node_id", "document_id", "matched_children", "merged_from", "hit_ratio", "score", "depth",
                    "kind", "mode", "rank", "token_count", "reason", "file_path", "strategy", "file_type")


def facade(hrag: Any) -> HRAG:
    """The sync facade behind an ``HRAG`` or an ``AsyncHRAG``."""
    from ..api import HRAG, AsyncHRAG

    if isinstance(hrag, AsyncHRAG):
        return hrag.hrag
    if isinstance(hrag, HRAG):
        return hrag
    raise TypeError(f"hrag must be an HRAG or AsyncHRAG instance, got {type(hrag).__name__}")


def build_retriever(hrag: Any, mode: str | None, *, settings: Settings | None, collection: str | None,
                    filter: dict[str, Any] | None, max_tokens: int | None,
                    params: Mapping[str, Any]) -> BaseRetriever[Any]:
    """The hrag retriever for an adapter's fields: a settings object, or a mode and flat parameters.

    Unknown parameters, or parameters of another mode, fail here, by name
    (:func:`hrag_pg.settings.for_mode`); ``collection``, ``filter`` and
    ``max_tokens`` narrow either.
    """
    scope = {name: value for name, value in
             (("collection", collection), ("filter", filter), ("max_tokens", max_tokens)) if value is not None}
    if settings is None:
        return facade(hrag).retriever(for_mode(mode or "parent-child", **scope, **dict(params)))
    if params:
        raise ValueError(f"pass the retrieval settings either as settings= or as parameters, not both "
                         f"(got settings and {', '.join(sorted(params))})")
    if mode is not None and mode != settings.mode:
        raise ValueError(f"mode {mode!r} does not match the settings given ({type(settings).__name__} is "
                         f"mode {settings.mode!r}); drop mode=")
    return facade(hrag).retriever(scoped(settings, **scope))  # type: ignore[arg-type]


def result_metadata(result: RetrievalResult) -> dict[str, Any]:
    """The document's own metadata, then the result's keys as every front end prints them
    (:func:`hrag_pg.operations.shapes.passage_fields`: ids as strings)."""
    return {**result.document_metadata, **passage_fields(result)}


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
