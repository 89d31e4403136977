"""Deterministic embedders for tests that need a real Embedder but not a neural model.

:class:`HashingEmbedder` is a genuine (if crude) embedding model: each text
becomes the L2-normalised sum of signed one-hot vectors of its character
bigrams (the feature-hashing trick), so texts that share many bigrams get
similar vectors, and the same text always gets the same vector in any
process.  It records what it embedded so tests can count re-embedding, and it
can be told to misbehave the way real models do (NaN output, a failure
half-way).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hrag_pg.ingest.tokens import ApproximateTokenCounter, TokenCounter


def _bucket(feature: str, dim: int) -> tuple[int, float]:
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dim, (1.0 if (value >> 63) & 1 else -1.0)


class HashingEmbedder:
    """Character-bigram feature hashing into ``dim`` dimensions (default 384).

    * ``calls``: how many times :meth:`embed` was called;
    * ``texts``: every text embedded, in order;
    * ``nan_on``: texts containing this substring get a NaN vector (a broken model);
    * ``fail_after``: raise :class:`RuntimeError` once more than this many texts
      would have been embedded in total (a model crashing half-way).
    """

    model_name = "hashing-test"

    def __init__(self, dim: int = 384, *, nan_on: str | None = None, fail_after: int | None = None) -> None:
        self._dim = dim
        self.nan_on = nan_on
        self.fail_after = fail_after
        self.calls = 0
        self.texts: list[str] = []
        self._counter = ApproximateTokenCounter()
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[int, float]] = {}

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def token_counter(self) -> TokenCounter:
        return self._counter

    def vector(self, text: str) -> np.ndarray:
        out = np.zeros(self._dim, dtype=np.float32)
        features = [text[i:i + 2] for i in range(len(text) - 1)] or [text]
        for feature in features:
            slot = self._cache.get(feature)
            if slot is None:
                slot = self._cache[feature] = _bucket(feature, self._dim)
            out[slot[0]] += slot[1]
        norm = float(np.linalg.norm(out))
        if norm == 0.0:  # the empty text (or bigrams cancelling out): a fixed unit vector
            out[0] = 1.0
            return out
        return out / norm

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        with self._lock:
            self.calls += 1
            if self.fail_after is not None and len(self.texts) + len(texts) > self.fail_after:
                allowed = max(self.fail_after - len(self.texts), 0)
                self.texts.extend(texts[:allowed])
                raise RuntimeError(
                    f"{self.model_name}: simulated model failure after {self.fail_after} texts"
                )
            self.texts.extend(texts)
        rows = np.zeros((len(texts), self._dim), dtype=np.float32)
        for i, text in enumerate(texts):
            rows[i] = np.nan if self.nan_on is not None and self.nan_on in text else self.vector(text)
        return rows


class WrongDimEmbedder(HashingEmbedder):
    """The same model with 8 dimensions: refused by a 384-dimensional database."""

    model_name = "hashing-test-8"

    def __init__(self) -> None:
        super().__init__(dim=8)


class SaltedHashingEmbedder(HashingEmbedder):
    """Another model of the same dimension: other vectors, other name, other token counts.

    What a collection switched with ``hrag reembed`` is switched to in tests:
    its vectors are those of the text behind a salt, and it counts 1.6 tokens
    per word (the plain one counts 1.3), so token counts visibly follow the model.
    """

    model_name = "hashing-salted"

    def __init__(self, dim: int = 384, **kwargs: Any) -> None:
        super().__init__(dim, **kwargs)
        self._counter = ApproximateTokenCounter()
        self._counter.words_factor = 1.6

    def vector(self, text: str) -> np.ndarray:
        return super().vector("\x01salt\x01" + text)
