"""hrag-pg: PostgreSQL-native hierarchical retrieval (Parent-Child and Auto-Merging).

The retrieval logic lives in SQL (``sql/``); this package connects, ingests
documents as trees of nodes, embeds them, and calls those SQL functions.
Heavy parts are imported lazily so ``import hrag_pg`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .api import HRAG, AsyncHRAG, IngestReport
    from .ingest.pipeline import IngestOptions
    from .models import ChildChunk, Context, Node, OutlineEntry, OutlineNode, ParentChunk, RetrievalResult
    from .retrievers import AutoMergingRetriever, AutoRetriever, ParentChildRetriever
    from .settings import AutoMergeSettings, BudgetSettings, ParentChildSettings

_EXPORTS = {
    "HRAG": "api", "AsyncHRAG": "api",
    "ParentChildSettings": "settings", "AutoMergeSettings": "settings", "BudgetSettings": "settings",
    "ParentChildRetriever": "retrievers", "AutoMergingRetriever": "retrievers", "AutoRetriever": "retrievers",
    "IngestReport": "api", "IngestOptions": "ingest.pipeline",
    "Node": "models", "ParentChunk": "models", "ChildChunk": "models", "RetrievalResult": "models",
    "Context": "models", "OutlineEntry": "models", "OutlineNode": "models",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        from importlib import import_module

        return getattr(import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'hrag_pg' has no attribute {name!r}")


# Spelled out (not sorted(_EXPORTS)) so type checkers and linters can read it;
# tests/unit/test_package.py keeps the two lists equal.
__all__ = [
    "HRAG", "AsyncHRAG", "AutoMergeSettings", "AutoMergingRetriever", "AutoRetriever", "BudgetSettings",
    "ChildChunk", "Context", "IngestOptions", "IngestReport",
    "Node", "OutlineEntry", "OutlineNode", "ParentChildRetriever", "ParentChildSettings", "ParentChunk",
    "RetrievalResult",
]
