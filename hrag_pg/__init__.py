"""hrag-pg: PostgreSQL-native hierarchical retrieval (Parent-Child and Auto-Merging)."""

from __future__ import annotations

__version__ = "0.1.0"
