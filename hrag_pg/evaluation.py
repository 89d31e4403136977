"""Evaluating retrieval against a question set with gold evidence snippets.

A question set is a JSON Lines file, one question per line::

    {"id": "n01", "kind": "narrow", "question": "...", "evidence": ["verbatim snippet", ...]}

``kind`` is ``narrow`` (answered by one paragraph) or ``broad`` (needs a
whole section).  A retrieval is judged only by the text it returns: a gold
snippet counts as found when it occurs in one returned passage, compared
with whitespace collapsed (so line breaks and paragraph joins do not
matter).  Snippets never match across two passages.

Per kind the report gives snippet recall (mean share of a question's
snippets found), the full-recall rate (share of questions with every
snippet found), mean context tokens, recall per 1,000 context tokens,
latency p50/p95 and, for each token budget, the recall when the context is
cut to that many tokens in the system's own order.  The pure parts
(:func:`snippets_found`, :func:`percentile`, :func:`truncate_passages`,
:func:`score_passages`, :func:`summarize`) are shared by the benchmark,
which scores other systems' contexts the same way.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from . import defaults

Kind = Literal["narrow", "broad"]
KINDS: tuple[str, ...] = ("narrow", "broad")
MODES: tuple[str, ...] = defaults.MODES
#: Context budgets (tokens) at which recall is reported by default.
DEFAULT_BUDGETS: tuple[int, ...] = (2000, 4000)


# --------------------------------------------------------------------------- questions


@dataclass(frozen=True)
class Question:
    """One evaluation question and the verbatim corpus snippets that answer it."""

    id: str
    kind: Kind
    question: str
    evidence: tuple[str, ...]
    #: The collection to ask it in (optional; else the evaluation's own setting): a question set may
    #: span collections embedded with different models, which one question cannot search together.
    collection: str | None = None


def parse_question(record: Any, where: str = "question") -> Question:
    """Validate one decoded JSON record; errors name the field and ``where``."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [key for key in ("id", "kind", "question", "evidence") if key not in record]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    qid, kind, text, evidence = record["id"], record["kind"], record["question"], record["evidence"]
    if not isinstance(qid, str) or not qid.strip():
        raise ValueError(f"{where}: 'id' must be a non-empty string")
    if kind not in KINDS:
        raise ValueError(f"{where} ({qid}): 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{where} ({qid}): 'question' must be a non-empty string")
    if (not isinstance(evidence, list) or not evidence
            or not all(isinstance(s, str) and s.strip() for s in evidence)):
        raise ValueError(f"{where} ({qid}): 'evidence' must be a non-empty list of non-empty strings")
    collection = record.get("collection")
    if collection is not None and (not isinstance(collection, str) or not collection.strip()):
        raise ValueError(f"{where} ({qid}): 'collection' must be a non-empty string when given")
    return Question(id=qid, kind=kind, question=text, evidence=tuple(evidence), collection=collection)


def load_questions(path: str | Path) -> list[Question]:
    """Read a question set (JSON Lines; blank lines ignored); ids must be unique."""
    questions: list[Question] = []
    seen: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not valid JSON ({exc.msg})") from None
            question = parse_question(record, where)
            if question.id in seen:
                raise ValueError(f"{where}: duplicate question id {question.id!r}")
            seen.add(question.id)
            questions.append(question)
    if not questions:
        raise ValueError(f"{path}: no questions")
    return questions


# --------------------------------------------------------------------------- matching


def normalize(text: str) -> str:
    """Whitespace collapsed to single spaces, ends stripped."""
    return " ".join(text.split())


def snippets_found(passages: Sequence[str], evidence: Sequence[str]) -> list[bool]:
    """For each snippet: does it occur (whitespace-collapsed) inside one of the passages?"""
    texts = [normalize(p) for p in passages]
    return [any(normalize(snippet) in text for text in texts) for snippet in evidence]


# --------------------------------------------------------------------------- tokens


class Truncator(Protocol):
    """Counts tokens and cuts a text after its first ``n`` tokens."""

    def count(self, text: str) -> int: ...

    def cut(self, text: str, max_tokens: int) -> str: ...


class WordTruncator:
    """One token per whitespace-separated word (model-free; tests and fallbacks)."""

    def count(self, text: str) -> int:
        return len(text.split())

    def cut(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        words = text.split()
        return text if len(words) <= max_tokens else " ".join(words[:max_tokens])


class TokenizerTruncator:
    """Exact counts and cuts with a HuggingFace *fast* tokenizer (special tokens excluded).

    The cut is made at the character offset where token ``n + 1`` starts, so
    the kept text is the original text (not a lower-cased decode of tokens).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def _encode(self, text: str, offsets: bool = False) -> Any:
        return self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=offsets,
                              return_attention_mask=False, return_token_type_ids=False, verbose=False)

    def count(self, text: str) -> int:
        return len(self._encode(text)["input_ids"])

    def cut(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        offsets = self._encode(text, offsets=True)["offset_mapping"]
        if len(offsets) <= max_tokens:
            return text
        return text[: offsets[max_tokens - 1][1]]


class CounterTruncator:
    """Counts from any token counter; a cut keeps the longest prefix within the budget (binary search)."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter

    def count(self, text: str) -> int:
        return int(self.counter.count(text))

    def cut(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count(text) <= max_tokens:
            return text
        low, high = 0, len(text)  # text[:low] fits, text[:high] does not
        while high - low > 1:
            middle = (low + high) // 2
            if self.count(text[:middle]) <= max_tokens:
                low = middle
            else:
                high = middle
        return text[:low]


def truncator_for(embedder: Any) -> Truncator:
    """The embedder's tokenizer as a truncator: a fast HuggingFace tokenizer where the model folder has one
    (exact offsets), else its token counter, else :class:`WordTruncator`."""
    folder = getattr(embedder, "folder", None)
    if folder is not None:
        try:
            from transformers import AutoTokenizer

            return TokenizerTruncator(AutoTokenizer.from_pretrained(str(folder)))
        except ImportError:
            pass
    model = getattr(embedder, "model", None)
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and getattr(tokenizer, "is_fast", False):
        return TokenizerTruncator(tokenizer)
    counter = getattr(embedder, "token_counter", None)
    return CounterTruncator(counter) if counter is not None else WordTruncator()


def truncate_passages(passages: Sequence[str], max_tokens: int, truncator: Truncator,
                      counts: Sequence[int] | None = None) -> list[str]:
    """The passages in their order, cut so the total is at most ``max_tokens``.

    Passages are kept whole while they fit; the first that does not fit is
    cut to the remaining budget and everything after it is dropped.
    ``counts`` (the passages' token counts) may be given to avoid recounting.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    counts = list(counts) if counts is not None else [truncator.count(p) for p in passages]
    kept: list[str] = []
    left = max_tokens
    for passage, tokens in zip(passages, counts, strict=True):
        if tokens <= left:
            kept.append(passage)
            left -= tokens
            continue
        if left > 0:
            kept.append(truncator.cut(passage, left))
        break
    return kept


# --------------------------------------------------------------------------- statistics


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0-100) with linear interpolation between closest ranks.

    Same definition as numpy's default; NaN for no values.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q}")
    ordered = sorted(values)
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


@dataclass
class QuestionResult:
    """How one retrieval did on one question."""

    id: str
    kind: str
    found: list[bool]
    tokens: int
    passages: int
    latency_ms: float
    #: budget -> found flags after cutting the context to that many tokens
    budget_found: dict[int, list[bool]] = field(default_factory=dict)

    @property
    def recall(self) -> float:
        return sum(self.found) / len(self.found) if self.found else math.nan

    @property
    def full(self) -> bool:
        return bool(self.found) and all(self.found)

    def budget_recall(self, budget: int) -> float:
        flags = self.budget_found.get(budget, [])
        return sum(flags) / len(flags) if flags else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "found": self.found, "recall": self.recall,
            "tokens": self.tokens, "passages": self.passages, "latency_ms": round(self.latency_ms, 3),
            "budget_found": {str(k): v for k, v in self.budget_found.items()},
        }


def score_passages(question: Question, passages: Sequence[str], latency_ms: float, truncator: Truncator,
                   budgets: Sequence[int] = DEFAULT_BUDGETS) -> QuestionResult:
    """Judge one retrieval's passages (in the system's own order) against a question's evidence."""
    counts = [truncator.count(p) for p in passages]
    budget_found = {
        budget: snippets_found(truncate_passages(passages, budget, truncator, counts), question.evidence)
        for budget in budgets
    }
    return QuestionResult(
        id=question.id, kind=question.kind, found=snippets_found(passages, question.evidence),
        tokens=sum(counts), passages=len(passages), latency_ms=latency_ms, budget_found=budget_found,
    )


@dataclass
class KindSummary:
    """Aggregates over the questions of one kind (or ``all``)."""

    kind: str
    questions: int
    recall: float
    full_recall_rate: float
    mean_tokens: float
    recall_per_1k_tokens: float
    latency_p50_ms: float
    latency_p95_ms: float
    budget_recall: dict[int, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "questions": self.questions, "recall": self.recall,
            "full_recall_rate": self.full_recall_rate, "mean_tokens": self.mean_tokens,
            "recall_per_1k_tokens": self.recall_per_1k_tokens, "latency_p50_ms": self.latency_p50_ms,
            "latency_p95_ms": self.latency_p95_ms,
            "budget_recall": {str(k): v for k, v in self.budget_recall.items()},
        }


def summarize_kind(kind: str, results: Sequence[QuestionResult], budgets: Sequence[int]) -> KindSummary:
    recall = _mean([r.recall for r in results])
    tokens = _mean([float(r.tokens) for r in results])
    latencies = [r.latency_ms for r in results]
    return KindSummary(
        kind=kind,
        questions=len(results),
        recall=recall,
        full_recall_rate=_mean([1.0 if r.full else 0.0 for r in results]),
        mean_tokens=tokens,
        recall_per_1k_tokens=recall / (tokens / 1000) if tokens and tokens > 0 else math.nan,
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        budget_recall={b: _mean([r.budget_recall(b) for r in results]) for b in budgets},
    )


@dataclass
class EvalReport:
    """One system's (or one hrag configuration's) results on a question set."""

    system: str
    settings: dict[str, Any]
    results: list[QuestionResult]
    budgets: tuple[int, ...] = DEFAULT_BUDGETS

    def summary(self, kind: str = "all") -> KindSummary:
        chosen = self.results if kind == "all" else [r for r in self.results if r.kind == kind]
        return summarize_kind(kind, chosen, self.budgets)

    @property
    def kinds(self) -> list[str]:
        present = {r.kind for r in self.results}
        return [k for k in KINDS if k in present] + ["all"]

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "settings": self.settings,
            "budgets": list(self.budgets),
            "summary": {kind: self.summary(kind).to_json() for kind in self.kinds},
            "questions": [r.to_json() for r in self.results],
        }

    def render(self) -> Any:
        """A rich Table: one row per kind."""
        from rich import box
        from rich.table import Table

        # short headers and a caption: ten columns fit an 80-column terminal (or a pipe) without "reca…"
        table = Table(title=f"{self.system} {_settings_text(self.settings)}".strip(), box=box.SIMPLE_HEAD,
                      show_edge=False, collapse_padding=True,
                      caption="recall: share of the evidence found; full: questions with all of it; "
                              "per 1k: recall per 1,000 tokens; @N: recall of the context cut at N tokens")
        for column in ("kind", "n", "recall", "full", "tokens", "per 1k", "p50 ms", "p95 ms"):
            table.add_column(column, justify="left" if column == "kind" else "right")
        for budget in self.budgets:
            table.add_column(f"@{budget:,}", justify="right")
        for kind in self.kinds:
            s = self.summary(kind)
            table.add_row(
                kind, str(s.questions), _fmt(s.recall), _fmt(s.full_recall_rate), _fmt(s.mean_tokens, 0),
                _fmt(s.recall_per_1k_tokens, 3), _fmt(s.latency_p50_ms, 1), _fmt(s.latency_p95_ms, 1),
                *(_fmt(s.budget_recall.get(b, math.nan)) for b in self.budgets),
            )
        return table


def summarize(system: str, results: Sequence[QuestionResult], settings: dict[str, Any] | None = None,
              budgets: Sequence[int] = DEFAULT_BUDGETS) -> EvalReport:
    return EvalReport(system=system, settings=dict(settings or {}), results=list(results), budgets=tuple(budgets))


def _fmt(value: float, digits: int = 2) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


# --------------------------------------------------------------------------- running hrag


def evaluate(
    hrag: Any,
    questions: Sequence[Question],
    *,
    mode: str,
    max_tokens: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    system: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    **retriever_settings: Any,
) -> EvalReport:
    """Run each question through an hrag retriever's ``context()`` and score it.

    ``mode`` is ``parent-child``, ``auto-merge`` or ``auto``; ``max_tokens`` is the
    context budget (the budget mode's default when None); other keyword arguments
    (``collection``, ``lexical_weight``, ``min_relative_score``, ``top_k``, ``reranker`` …)
    are the mode's settings by their flat names (:func:`hrag_pg.settings.for_mode`).
    Latency is end to end: question embedding, the SQL call and assembly.
    """
    from .settings import for_mode

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if max_tokens is not None and max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive, got {max_tokens}")
    default_collection = retriever_settings.pop("collection", None)
    retrievers: dict[str | None, Any] = {}
    truncators: dict[str | None, Truncator] = {}
    for collection in dict.fromkeys(q.collection or default_collection for q in questions):
        budget = {} if max_tokens is None else {"max_tokens": max_tokens}
        retrievers[collection] = hrag.retriever(for_mode(mode, collection=collection, **budget,
                                                         **retriever_settings))
        # tokens are counted as the collection's own model counts them
        truncators[collection] = truncator_for(hrag.query_embedder(collection))
        hrag.embed_query(questions[0].question, collection)  # load the model outside the timings
    results: list[QuestionResult] = []
    for index, question in enumerate(questions, start=1):
        collection = question.collection or default_collection
        retriever, truncator = retrievers[collection], truncators[collection]
        started = time.perf_counter()
        context = retriever.context(question.question)
        elapsed_ms = (time.perf_counter() - started) * 1000
        passages = [r.content for r in context.results]
        results.append(score_passages(question, passages, elapsed_ms, truncator, budgets))
        if progress:
            progress(index, len(questions))
    settings: dict[str, Any] = {"mode": mode}
    if max_tokens is not None:
        settings["max_tokens"] = max_tokens
    settings.update({k: _plain(v) for k, v in {"collection": default_collection, **retriever_settings}.items()})
    return summarize(system or f"hrag-pg {mode}", results, settings, budgets)


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else type(value).__name__


__all__ = [
    "DEFAULT_BUDGETS",
    "EvalReport",
    "KindSummary",
    "Question",
    "QuestionResult",
    "TokenizerTruncator",
    "Truncator",
    "WordTruncator",
    "evaluate",
    "load_questions",
    "normalize",
    "parse_question",
    "percentile",
    "score_passages",
    "snippets_found",
    "summarize",
    "truncate_passages",
    "truncator_for",
]
