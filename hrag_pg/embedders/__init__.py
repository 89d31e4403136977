"""Embedding backends behind the :class:`~hrag_pg.embedding.Embedder` protocol, loaded by model name.

Each backend imports its engine only when a model is loaded, so a command
that embeds nothing imports none of them (and never torch).
"""

from __future__ import annotations

from functools import lru_cache

from ..embedding import E5_Q4, MINILM, Embedder, canonical_name, configured_model


def load(name: str) -> Embedder:
    """The embedder for a canonical model name (see :func:`hrag_pg.embedding.canonical_name`)."""
    if name == MINILM:
        from .minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if name == E5_Q4:
        from .e5_q4 import E5Q4Embedder

        return E5Q4Embedder()
    from .sentence_transformers import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(name)


@lru_cache(maxsize=8)
def embedder_for(name: str | None = None) -> Embedder:
    """One shared embedder per model name per process (``None``: the configured or bundled default)."""
    return load(canonical_name(name or configured_model() or MINILM))


def default_embedder(model: str | None = None) -> Embedder:
    """The embedder for ``model``: :func:`embedder_for` under the name the benchmark scripts import."""
    return embedder_for(model)
