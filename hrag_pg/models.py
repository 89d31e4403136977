"""Pydantic models: the Python view of nodes and of retrieval results."""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Node(BaseModel):
    """Any node of a document tree, as stored in ``hrag.nodes``."""

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    document_id: uuid.UUID
    parent_id: uuid.UUID | None
    collection: str
    depth: int
    position: int
    kind: str
    title: str | None
    heading_path: list[str]
    content: str
    token_count: int
    child_count: int
    metadata: dict[str, Any] = Field(default_factory=dict)


class ParentChunk(BaseModel):
    """A parent: the context handed to the LLM (full text of its subtree); see ``HRAG.parent_chunk``."""

    model_config = ConfigDict(frozen=True)

    id: uuid.UUID
    doc_id: uuid.UUID
    title: str | None
    content: str
    child_ids: list[uuid.UUID]
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChildChunk(BaseModel):
    """A child: what the vector search matches; see ``HRAG.child_chunks``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    id: uuid.UUID
    parent_id: uuid.UUID | None
    doc_id: uuid.UUID
    content: str
    embedding: list[float] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchHit(BaseModel):
    """One row of ``hrag.search_leaves`` (possibly rescored by a reranker)."""

    model_config = ConfigDict(frozen=True)

    node_id: uuid.UUID
    parent_id: uuid.UUID | None
    document_id: uuid.UUID
    score: float
    #: What a reranker reads: ``[heading › path] text``.
    rerank_text: str = ""


class OutlineEntry(BaseModel):
    """One node of the heading tree, as ``hrag.outline`` and ``hrag.children`` return it.

    Enough to choose what to read next: where the node sits, what it is
    called and what reading it costs (``token_count`` is its whole subtree's).
    """

    model_config = ConfigDict(frozen=True)

    node_id: uuid.UUID
    document_id: uuid.UUID
    source: str
    collection: str
    depth: int
    heading_path: list[str] = Field(default_factory=list)
    title: str | None = None
    kind: str
    #: Tokens of the node's full text (its subtree): what reading it costs.
    token_count: int
    #: Stored number of children (markup leaves included, which hrag.children leaves out).
    child_count: int


class OutlineNode(OutlineEntry):
    """One node read whole (``hrag.node``): its outline columns, its parent and its full text."""

    parent_id: uuid.UUID | None = None
    content: str = ""


class RetrievalResult(BaseModel):
    """One context passage returned by either retrieval mode, with why it was returned."""

    model_config = ConfigDict(frozen=True)

    mode: Literal["parent-child", "auto-merge", "auto"]
    node_id: uuid.UUID
    document_id: uuid.UUID
    title: str | None
    heading_path: list[str]
    content: str
    score: float
    rank: int
    depth: int | None = None
    kind: str | None = None
    #: parent-child: the children whose match selected this parent.
    matched_children: list[uuid.UUID] | None = None
    #: auto-merge: the hits this node absorbed (empty if it is a plain hit).
    merged_from: list[uuid.UUID] | None = None
    #: auto-merge: covered children / child_count when the node was merged.
    hit_ratio: float | None = None
    token_count: int = 0
    #: The document's source name (what to cite) and its metadata (the user's keys and hrag's).
    source: str | None = None
    document_metadata: dict[str, Any] = Field(default_factory=dict)
    #: auto mode (and budget replacements): why the selection chose this node.
    reason: str | None = None

    def explanation(self) -> str:
        """One line saying why this passage is in the context."""
        if self.reason:
            return self.reason
        if self.mode == "parent-child":
            n = len(self.matched_children or [])
            return f"parent of {n} matching child{'ren' if n != 1 else ''}"
        if self.merged_from:
            hits = f"{len(self.merged_from)} hit{'s' if len(self.merged_from) != 1 else ''}"
            return (f"merged from {hits} (hit ratio {self.hit_ratio:.2f})" if self.hit_ratio is not None
                    else f"absorbed {hits} below it")
        return "direct hit"


class Context(BaseModel):
    """The assembled context within a token budget, and what did not fit."""

    results: list[RetrievalResult]
    dropped: list[RetrievalResult] = Field(default_factory=list)
    total_tokens: int = 0
    max_tokens: int | None = None

    @property
    def text(self) -> str:
        return "\n\n---\n\n".join(r.content for r in self.results)


class IngestResult(BaseModel):
    """What writing one document did."""

    source: str
    collection: str
    document_id: uuid.UUID
    status: Literal["created", "updated", "unchanged"]
    nodes: int
    embedded: int
    reused: int
    seconds: float
