"""Any sentence-transformers model, offline, with query/passage prompts.

Loading imports torch (seconds), so it happens on the first text to embed;
the tokenizer alone (``tokenizer.json`` of a local folder) serves token
counting before that.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..embedding import (
    DEFAULT_BATCH_SIZE,
    ModelIdentity,
    check_vectors,
    e5_prompts,
    fingerprint_file,
)
from ..errors import EmbeddingError, install_extra
from ..ingest.tokens import ApproximateTokenCounter, TokenCounter, TokenizerCounter

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


@lru_cache(maxsize=4)
def load_model(name_or_path: str, device: str | None) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise EmbeddingError(
            f"Model {name_or_path!r} needs sentence-transformers, which is not installed: run "
            f"`pip install torch==2.13.0` and then {install_extra('embed')}."
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


class FastTokenizer:
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
def load_tokenizer(name_or_path: str) -> Any:
    """The tokenizer of a local model folder without the model's weights, or None.

    Only folders with a ``tokenizer.json`` (the fast tokenizer the model itself
    uses) qualify; for anything else the model is loaded and its tokenizer used.
    """
    path = Path(name_or_path) / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        return FastTokenizer(path)
    except Exception:  # noqa: BLE001 - any failure: count with the loaded model's tokenizer instead
        return None


def folder_prompts(folder: Path) -> tuple[str, str] | None:
    """The prompts a sentence-transformers folder declares (``config_sentence_transformers.json``), if any."""
    config = folder / "config_sentence_transformers.json"
    try:
        prompts = json.loads(config.read_text(encoding="utf-8")).get("prompts") or {}
    except (OSError, ValueError):
        return None
    if not isinstance(prompts, dict) or not prompts:
        return None
    passage = prompts.get("passage", prompts.get("document", ""))
    return str(prompts.get("query", "")), str(passage)


def folder_dimension(folder: Path) -> int | None:
    """The output dimension a local sentence-transformers folder declares, or None (then the model is loaded).

    The last module that sets a width wins: a ``Dense`` projection's ``out_features``, else the
    pooling's ``word_embedding_dimension``.
    """
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    dimension = None
    for module in modules if isinstance(modules, list) else []:
        try:
            config = json.loads((folder / str(module.get("path", "")) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, AttributeError):
            continue
        kind = str(module.get("type", ""))
        if kind.endswith(".Dense") and isinstance(config.get("out_features"), int):
            dimension = config["out_features"]
        elif kind.endswith(".Pooling") and isinstance(config.get("word_embedding_dimension"), int):
            dimension = config["word_embedding_dimension"]
    return dimension


class SentenceTransformerEmbedder:
    """A sentence-transformers model by name or local folder (loaded on the first text to embed)."""

    def __init__(
        self,
        model: str,
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str | None = None,
        show_progress: bool = False,
        name: str | None = None,
        prompts: tuple[str, str] | None = None,
    ) -> None:
        self.model_name = model
        #: The name recorded for collections (the bundled MiniLM's path is not a name to show).
        self.display_name = name or model
        self.batch_size = batch_size
        self.device = device
        self.show_progress = show_progress
        folder = Path(model)
        self.query_prompt, self.passage_prompt = (
            prompts or (folder_prompts(folder) if folder.is_dir() else None) or e5_prompts(model))
        self._model: Any = None
        self._identity: ModelIdentity | None = None
        self._lock = threading.Lock()
        #: How many texts this embedder has embedded (tests and the bench read it).
        self.texts_embedded = 0

    @property
    def model(self) -> Any:
        with self._lock:
            if self._model is None:
                self._model = load_model(self.model_name, self.device)
            return self._model

    @property
    def dim(self) -> int:
        declared = folder_dimension(Path(self.model_name))
        if declared is not None:  # (known without loading the weights: an unchanged re-ingest loads none)
            return declared
        model = self.model
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:  # pragma: no cover - every real model reports it
            raise EmbeddingError(f"Embedding model {self.model_name} does not report its dimension.")
        return int(dim)

    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            self._identity = ModelIdentity(self.display_name, self.dim, self._fingerprint(),
                                           self.query_prompt, self.passage_prompt)
        return self._identity

    def _fingerprint(self) -> str:
        folder = Path(self.model_name)
        for name in WEIGHT_FILES:
            if (folder / name).is_file():
                return fingerprint_file(folder / name)
        # A model from the Hugging Face cache: its loaded parameters, sampled.
        import hashlib

        digest = hashlib.sha256()
        for _, tensor in list(self.model.state_dict().items())[:: max(1, len(self.model.state_dict()) // 16)]:
            digest.update(tensor.detach().cpu().numpy().tobytes()[:65536])
        return digest.hexdigest()[:16]

    @property
    def token_counter(self) -> TokenCounter:
        # Counting needs only the tokenizer: loading it alone takes a fraction of the model's
        # load time, so parsing and hashing (an unchanged re-ingest) skip the weights.
        alone = load_tokenizer(self.model_name)
        if alone is not None:
            return TokenizerCounter(alone)
        tokenizer = getattr(self.model, "tokenizer", None)
        return TokenizerCounter(tokenizer) if tokenizer is not None else ApproximateTokenCounter()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.passage_prompt)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, self.query_prompt)

    def _encode(self, texts: Sequence[str], prompt: str) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            [prompt + t for t in texts] if prompt else list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=self.show_progress and len(texts) > self.batch_size,
        )
        self.texts_embedded += len(texts)
        return check_vectors(vectors, len(texts), model=self.display_name)
