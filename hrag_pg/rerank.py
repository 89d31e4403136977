"""Reranking child candidates *before* parent expansion or merging.

The seed warns not to skip it: a bi-encoder's top children are noisy, and
expanding a wrong child wastes a whole parent of context.  A reranker
rescores the candidate children (query, child text) jointly; the best ones
then go through ``hrag.parent_child_hits`` / ``hrag.auto_merge_hits``.

Typical public cross-encoders (not bundled; give a local path offline):
``cross-encoder/ms-marco-MiniLM-L-6-v2`` (English, small and fast),
``BAAI/bge-reranker-base`` / ``BAAI/bge-reranker-v2-m3`` (multilingual,
Japanese included), ``hotchpotch/japanese-reranker-cross-encoder-small-v1``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from .errors import EmbeddingError, install_extra


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, text) pairs; higher is more relevant."""

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A ``sentence_transformers.CrossEncoder`` (any model name or local path)."""

    def __init__(self, model: str, *, device: str | None = None, batch_size: int = 32) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            from sentence_transformers import CrossEncoder
        except ImportError as exc:
            raise EmbeddingError(f"CrossEncoder reranking needs the embed extra: {install_extra('embed')}.") from exc
        try:
            self.model: Any = CrossEncoder(model, device=device or "cpu")
        except Exception as exc:
            raise EmbeddingError(
                f"Cannot load cross-encoder {model!r} offline ({type(exc).__name__}: {exc}); "
                "give a local directory holding the model."
            ) from exc
        self.batch_size = batch_size

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        scores = self.model.predict([(query, t) for t in texts], batch_size=self.batch_size,
                                    show_progress_bar=False)
        return [float(s) for s in scores]
