"""Embedding backends behind the :class:`~hrag_pg.embedding.Embedder` protocol, loaded by model name.

Each backend imports its engine only when a model is loaded, so a command
that embeds nothing imports none of them (and never torch).
"""

from __future__ import annotations

from ..embedding import E5_Q4, MINILM, Embedder


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
