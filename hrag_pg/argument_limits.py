"""The ranges hrag accepts, in one place for the CLI and the Python API.

The SQL functions check the same ranges (``hrag._check_count`` bounds every
count by 1..1000, ``merge_threshold`` and ``min_relative_score`` lie in
(0, 1], ``lexical_weight`` in [0, 1]); checking them here first means the
message names the argument the caller typed (``--top-k`` on the command
line, ``top_k`` in Python) and the value they gave, not an internal one.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from .errors import InvalidArgument

#: Upper bound of every count (k, parents, candidates): hrag._check_count in sql/common.sql.
MAX_COUNT = 1000
#: Largest token budget accepted (hrag._fit_budget in sql/budget.sql).
MAX_CONTEXT_TOKENS = 100_000
#: Ingestion: token sizes of children, overlaps, parents and windows.
MAX_CHUNK_TOKENS = 100_000
#: Longest question accepted; the bundled models read 256 (MiniLM) or 512 (e5) tokens of it anyway.
MAX_QUESTION_CHARS = 10_000


def check_question(question: str) -> str:
    """A question that is not empty nor over MAX_QUESTION_CHARS (``hrag_pg.api`` re-exports it)."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError("the question is empty; ask something")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(
            f"the question is {len(question):,} characters long; the limit is {MAX_QUESTION_CHARS:,} "
            "(a model reads only its start: all-MiniLM-L6-v2 its first 256 tokens, multilingual-e5-small its first 512)"
        )
    return question


def check_node_id(value: Any) -> uuid.UUID:
    """A node id given as a UUID or its text, else InvalidArgument naming what was given (not a driver error)."""
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise InvalidArgument(f"{shown} is not a node id (a UUID)", field="node_id") from None


def check_count(value: Any, name: str, *, maximum: int = MAX_COUNT) -> int:
    """An integer in 1..maximum, else InvalidArgument naming ``name`` and the value given."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidArgument(f"{name} must be between 1 and {maximum}, got {value!r}", field=name)
    return value


def check_nonnegative(value: Any, name: str, *, maximum: int) -> int:
    """An integer in 0..maximum."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise InvalidArgument(f"{name} must be between 0 and {maximum}, got {value!r}", field=name)
    return value


def check_fraction(value: Any, name: str, *, zero_allowed: bool) -> float:
    """A number in (0, 1] (or [0, 1] when ``zero_allowed``)."""
    low = "[0" if zero_allowed else "(0"
    ok = (not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
          and (0 <= value <= 1 if zero_allowed else 0 < value <= 1))
    if not ok:
        raise InvalidArgument(f"{name} must be in {low}, 1], got {value!r}", field=name)
    return float(value)
