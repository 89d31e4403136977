"""The shapes every front end prints: one pydantic model per kind of object.

``hrag query --json``, ``POST /retrieve``, the MCP tools and the adapters'
metadata all come from these, so a key has one name and a token count one
meaning everywhere: ``token_count`` is always what reading the node costs
(its whole subtree's text, as ``content`` holds it), the figure
``hrag outline`` shows for the same node.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..models import OutlineEntry, OutlineNode, RetrievalResult


class Answer(BaseModel):
    """What a question returns: the mode that answered, its budget, the passages and what did not fit."""

    model_config = ConfigDict(frozen=True)

    mode: str
    #: The token budget (None: the mode ran without one).
    max_tokens: int | None
    #: Tokens of ``results`` (sum of their ``token_count``).
    total_tokens: int
    results: list[RetrievalResult]
    #: Passages over the budget, left out (or replaced by a part of them, in ``results``).
    dropped: list[RetrievalResult] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The context as an LLM receives it: the passages in order, separated by rules."""
        return "\n\n---\n\n".join(r.content for r in self.results)


class ChildEntry(BaseModel):
    """One child of a node read whole: enough to pick the next node to open."""

    model_config = ConfigDict(frozen=True)

    node_id: uuid.UUID
    kind: str
    title: str | None = None
    #: Tokens of the child's whole subtree (what opening it costs).
    token_count: int
    child_count: int
    #: The start of its text on one line: what tells untitled paragraphs apart.
    lead: str


class NodeView(OutlineNode):
    """One node read whole (``hrag show``, ``GET /nodes/{id}``, MCP ``read_node``): where it sits, its full
    text (``content``, of ``token_count`` tokens) and its children."""

    children: list[ChildEntry] = Field(default_factory=list)


class SourceEntry(BaseModel):
    """One stored document (``hrag sources``, ``GET /sources``, MCP ``list_sources``), with its collection's
    model (None for a collection ingested before models were recorded)."""

    model_config = ConfigDict(frozen=True)

    source: str
    collection: str
    document_id: uuid.UUID
    nodes: int
    updated_at: datetime.datetime
    metadata: dict[str, Any] = Field(default_factory=dict)
    model: dict[str, Any] | None = None


class Hit(BaseModel):
    """One candidate the mode read: the leaf the search found, its score and its place (1: the best)."""

    model_config = ConfigDict(frozen=True)

    node_id: uuid.UUID
    document_id: uuid.UUID
    score: float
    rank: int


class TreeNode(BaseModel):
    """One node of an inspection's map: where it sits, what it costs, and what the retrieval did with it."""

    model_config = ConfigDict(frozen=True)

    node_id: uuid.UUID
    parent_id: uuid.UUID | None
    document_id: uuid.UUID
    source: str
    collection: str
    depth: int
    title: str | None = None
    kind: str
    #: Tokens of the node's whole subtree (what the node costs as a passage).
    token_count: int
    #: Stored number of children: a merge's hit-ratio denominator.
    child_count: int
    #: The start of the node's own text on one line.
    lead: str
    #: The node was a hit: its score and rank among the hits (None: it was not).
    hit_score: float | None = None
    hit_rank: int | None = None
    #: The node is a passage of the answer: its rank (None: it is not).
    passage_rank: int | None = None
    #: A passage's text holds this node (the node is the passage or lies inside one).
    in_context: bool = False


class Inspection(BaseModel):
    """A retrieval made visible: the answer, the settings it ran with, the hits it was built from, and the
    map of the documents it touched (``POST /inspect``, the inspector page)."""

    model_config = ConfigDict(frozen=True)

    question: str
    #: The mode's settings by their flat names (its defaults filled in).
    settings: dict[str, Any]
    answer: Answer
    #: Why each passage of the answer is in the context, one line each, in the answer's order.
    reasons: list[str]
    #: The candidates the mode read, best first.
    hits: list[Hit]
    #: The documents' nodes on the paths to the hits and passages, with their children, in document order.
    tree: list[TreeNode]


class Deleted(BaseModel):
    """What ``delete`` removed."""

    deleted: str
    collection: str


def passage_fields(result: RetrievalResult) -> dict[str, Any]:
    """A result's own keys as JSON values, without its text and its document's metadata: what the
    adapters put beside the document's metadata (``matched_children``/``merged_from`` only where the
    mode sets them)."""
    fields = result.model_dump(mode="json", exclude={"content", "document_metadata"})
    for key in ("matched_children", "merged_from"):
        if fields[key] is None:
            del fields[key]
    return fields


__all__ = ["Answer", "ChildEntry", "Deleted", "Hit", "Inspection", "NodeView", "OutlineEntry", "OutlineNode",
           "SourceEntry", "TreeNode", "passage_fields"]
