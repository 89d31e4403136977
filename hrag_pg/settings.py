"""One settings object per retrieval mode: what to search, and how the mode shapes the answer.

``HRAG``, ``AsyncHRAG``, the CLI and both adapters all describe a retrieval
with these objects, so a setting has one name, one default (from
:mod:`hrag_pg.defaults`) and one meaning wherever it is set; the facades add
only the per-call scope (collection, filter, budget) on top.

    from hrag_pg import AutoMergeSettings
    tight = AutoMergeSettings(top_k=8, merge_threshold=0.6)
    hrag.auto_merge("What does the BYOD policy require?", tight, collection="security")

The values are checked once, when the object is made, with messages naming
the setting as Python and JSON spell it (``top_k must be between 1 and 1000,
got 0``); every front end builds one of these objects, so every front end
refuses the same values with the same words (the CLI says ``--top-k``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict, TypeVar

from typing_extensions import Unpack

from . import defaults
from .argument_limits import MAX_CONTEXT_TOKENS, check_count, check_fraction
from .errors import InvalidArgument, UnknownSetting
from .rerank import Reranker


def _optional_count(value: Any, name: str, maximum: int | None = None) -> None:
    if value is not None:
        check_count(value, name) if maximum is None else check_count(value, name, maximum=maximum)


def _optional_fraction(value: Any, name: str, *, zero_allowed: bool = False) -> None:
    if value is not None:
        check_fraction(value, name, zero_allowed=zero_allowed)


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    """How candidates are found, the same in every mode.

    ``lexical_weight`` blends lexical term overlap into the vector score
    (``hrag.search_hybrid``; 0 searches by vector only), ``candidates`` is how
    many vector candidates that score rescores (None: the mode's count, at
    least 30), ``min_relative_score`` drops hits below that share of the best
    hit's score (scores are 0 at the question's background, so the share means
    the same under every model; a reranker sees every candidate), and a
    ``reranker`` rescores the ``rerank_candidates`` best children before the
    mode expands or merges them.  ``max_tokens`` bounds the context in stored
    token counts (None: no bound).
    """

    mode: ClassVar[str]

    collection: str | None = None
    filter: dict[str, Any] | None = None
    max_tokens: int | None = None
    lexical_weight: float = defaults.LEXICAL_WEIGHT
    candidates: int | None = None
    min_relative_score: float | None = None
    reranker: Reranker | None = None
    rerank_candidates: int = defaults.RERANK_CANDIDATES

    def __post_init__(self) -> None:
        if self.collection is not None and not isinstance(self.collection, str):
            raise InvalidArgument(f"collection must be a name (a string), got {self.collection!r}",
                                  field="collection")
        if self.filter is not None and not isinstance(self.filter, dict):
            raise InvalidArgument(f"filter must be a JSON object, got {type(self.filter).__name__} "
                                  f"{self.filter!r}", field="filter")
        _optional_count(self.max_tokens, "max_tokens", MAX_CONTEXT_TOKENS)
        check_fraction(self.lexical_weight, "lexical_weight", zero_allowed=True)
        _optional_count(self.candidates, "candidates")
        _optional_fraction(self.min_relative_score, "min_relative_score")
        if self.reranker is not None and not callable(getattr(self.reranker, "score", None)):
            raise InvalidArgument(f"reranker must have a score(question, texts) method, got "
                                  f"{type(self.reranker).__name__}", field="reranker")
        check_count(self.rerank_candidates, "rerank_candidates")


@dataclass(frozen=True, kw_only=True)
class ParentChildSettings(SearchSettings):
    """Small-to-big (``hrag.parent_child``): match ``top_k_children`` children, return up to
    ``max_parents`` whole parents, children scoring under ``min_score`` left out.

    ``max_parents`` is a ceiling, not a quota: hits scoring below
    ``min_relative_score`` of the best are no evidence, so a parent whose best
    child is far below the first parent's is not returned.  With
    ``max_tokens`` the parents are kept whole, best first, and one that does
    not fit is replaced by the part of it the budget mode chooses.
    """

    mode: ClassVar[str] = "parent-child"

    min_relative_score: float | None = defaults.MIN_RELATIVE_SCORE
    top_k_children: int = defaults.TOP_K_CHILDREN
    max_parents: int = defaults.MAX_PARENTS
    min_score: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count(self.top_k_children, "top_k_children")
        check_count(self.max_parents, "max_parents")
        if self.min_score is not None and (isinstance(self.min_score, bool)
                                           or not isinstance(self.min_score, (int, float))
                                           or not math.isfinite(self.min_score)):
            raise InvalidArgument(f"min_score must be a number, got {self.min_score!r}", field="min_score")


@dataclass(frozen=True, kw_only=True)
class AutoMergeSettings(SearchSettings):
    """Auto-merging (``hrag.auto_merge``): ``top_k`` leaves hit, merged into a parent once
    ``merge_threshold`` of its children are hit, upward.

    ``max_hit_share`` caps the hits at that share of the collection's search
    targets (``hrag.sample_hits``): twelve hits in a 35-item policy would
    merge into the whole document whatever the question; None takes
    ``top_k`` whatever the collection's size.  Hits are counted by evidence,
    not rank: one scoring below ``min_relative_score`` of the best is not a
    hit at all, so it neither votes for a merge nor comes back alone.
    """

    mode: ClassVar[str] = "auto-merge"

    min_relative_score: float | None = defaults.MIN_RELATIVE_SCORE
    top_k: int = defaults.TOP_K
    merge_threshold: float = defaults.MERGE_THRESHOLD
    max_hit_share: float | None = defaults.MAX_HIT_SHARE

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count(self.top_k, "top_k")
        check_fraction(self.merge_threshold, "merge_threshold", zero_allowed=False)
        _optional_fraction(self.max_hit_share, "max_hit_share")


@dataclass(frozen=True, kw_only=True)
class BudgetSettings(SearchSettings):
    """The budget mode (``hrag.retrieve``): the best non-overlapping context within ``max_tokens``.

    From ``top_k`` hits' ancestor paths the SQL chooses leaves, sections or
    whole chapters by the evidence each covers per token, and stops when what
    a node adds is no longer worth its tokens: a narrow question gets a few
    small nodes, a broad one merged sections, never more than ``max_tokens``.
    """

    mode: ClassVar[str] = "auto"

    max_tokens: int | None = defaults.MAX_TOKENS
    top_k: int = defaults.AUTO_TOP_K

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count(self.top_k, "top_k")
        if self.max_tokens is None:
            raise InvalidArgument("the budget mode needs max_tokens (a token budget), got None", field="max_tokens")


Settings = ParentChildSettings | AutoMergeSettings | BudgetSettings
M = TypeVar("M", ParentChildSettings, AutoMergeSettings, BudgetSettings)

#: The settings class of each mode name (``defaults.MODES``).
BY_MODE: dict[str, type[Settings]] = {cls.mode: cls for cls in (ParentChildSettings, AutoMergeSettings,
                                                                  BudgetSettings)}


class Scope(TypedDict, total=False):
    """What one call narrows on top of a mode's settings (the facades' keywords)."""

    collection: str | None
    filter: dict[str, Any] | None
    max_tokens: int | None


class Options(Scope, total=False):
    """The scope and any setting of the call's mode, by flat name (``hrag.retrieve(q, top_k=8)``).

    A setting of another mode is refused by :func:`scoped`, naming the mode
    that takes it.
    """

    lexical_weight: float
    candidates: int | None
    min_relative_score: float | None
    reranker: Reranker | None
    rerank_candidates: int
    top_k: int
    top_k_children: int
    max_parents: int
    min_score: float | None
    merge_threshold: float
    max_hit_share: float | None


def _field_names(cls: type[Settings], mode: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` under ``cls``'s field names (``top_k`` is parent-child's ``top_k_children``), or
    InvalidArgument naming the first one the mode does not take and the modes that do."""
    options = dict(options)
    if "top_k" in options and cls is ParentChildSettings:
        if "top_k_children" in options:
            raise InvalidArgument("top_k and top_k_children are the same setting in parent-child; give one",
                                  field="top_k")
        options["top_k_children"] = options.pop("top_k")
    for name in sorted(options):
        if name not in names_of(cls):
            others = [m for m, other in BY_MODE.items() if name in names_of(other)]
            taken_by = f"a setting of {' and '.join(others)}" if others else "not a retrieval setting"
            raise UnknownSetting(f"{name} is {taken_by}, not of mode {mode} (it takes {', '.join(names_of(cls))})",
                                 field=name, mode=mode, taken_by=others)
    return options


def scoped(settings: Settings, **options: Unpack[Options]) -> Settings:
    """``settings`` with the call's scope and settings (only those given) in place, each checked."""
    if not options:
        return settings
    return dataclasses.replace(settings, **_field_names(type(settings), settings.mode, dict(options)))


def for_method(cls: type[M], settings: Settings | None, method: str, **options: Unpack[Options]) -> M:
    """``settings`` (default: ``cls()``) with the call's scope and settings, for a facade method of
    ``cls``'s mode.

    A settings object of another mode is refused rather than quietly run
    as that mode: ``hrag.parent_child(q, AutoMergeSettings())`` is a mistake.
    """
    if settings is None:
        return cls(**_field_names(cls, cls.mode, dict(options)))
    if not isinstance(settings, cls):
        raise TypeError(f"{method} takes {cls.__name__} (mode {cls.mode}), got {type(settings).__name__} "
                        f"(mode {settings.mode}); call the method of that mode, or context(question, settings)")
    return scoped(settings, **options)  # type: ignore[return-value]


def names_of(cls: type[Settings]) -> tuple[str, ...]:
    """The setting names a mode takes, ``top_k`` included (the flat names the CLI and adapters use)."""
    names = [f.name for f in dataclasses.fields(cls)]
    return tuple(names if "top_k" in names else [*names, "top_k"])


def chosen_mode(mode: str | None, *, option: str = "mode") -> str:
    """``mode`` as given, or the default of a call that names no mode: the budget mode, as the decision
    guide says for a question of unknown kind (docs/modes.md)."""
    if mode is None:
        mode = "auto"
    if mode not in BY_MODE:
        raise InvalidArgument(f"{option} must be one of {', '.join(BY_MODE)}, got {mode!r}", field="mode")
    return mode


def for_mode(mode: str, **options: Any) -> Settings:
    """The settings of ``mode`` from flat names, as the CLI, the adapters and the server take them.

    ``top_k`` is the mode's hit count (``top_k_children`` in parent-child);
    an option the mode does not take is refused, naming the modes that do,
    rather than silently ignored.
    """
    cls = BY_MODE[chosen_mode(mode)]
    return cls(**_field_names(cls, mode, options))


__all__ = ["AutoMergeSettings", "BudgetSettings", "Options", "ParentChildSettings", "Scope", "SearchSettings",
           "Settings", "for_mode", "scoped"]
