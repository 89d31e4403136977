"""Assembling the final context within a token budget.

Greedy by score: take results best-first and keep each one that still fits;
a result that does not fit is dropped whole (never cut in half, since half a
clause can mean the opposite of the whole) and reported, and smaller ones
after it may still fit.  The kept results are returned in score order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .ingest.tokens import DEFAULT_COUNTER, TokenCounter
from .models import Context, RetrievalResult


def assemble(
    results: Sequence[RetrievalResult],
    max_tokens: int | None,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> Context:
    counted = [r.model_copy(update={"token_count": counter.count(r.content)}) for r in results]
    if max_tokens is None:
        return Context(results=counted, total_tokens=sum(r.token_count for r in counted))
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    kept: list[RetrievalResult] = []
    dropped: list[RetrievalResult] = []
    used = 0
    for result in sorted(counted, key=lambda r: (-r.score, r.rank)):
        if used + result.token_count <= max_tokens:
            kept.append(result)
            used += result.token_count
        else:
            dropped.append(result)
    return Context(results=kept, dropped=dropped, total_tokens=used, max_tokens=max_tokens)
