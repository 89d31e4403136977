"""A question and how to answer it, as every front end takes it; checked in one place.

Its own module, light on imports: the CLI builds one before it knows whether
it will ask the database or a server, and through a server it loads neither
numpy nor the database driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import defaults
from ..argument_limits import check_question
from ..settings import Settings, chosen_mode, for_mode


@dataclass(frozen=True)
class Question:
    """A question and how to answer it, as every front end takes it (flat setting names)."""

    text: str
    #: parent-child, auto-merge or auto (None: auto, the budget mode, as the decision guide says).
    mode: str | None = None
    #: The token budget (None: the budget mode's default; the other modes run without one).
    max_tokens: int | None = None
    collection: str | None = None
    filter: dict[str, Any] | None = None
    #: The mode's settings by flat name (``top_k``, ``merge_threshold``, ...).
    settings: dict[str, Any] = field(default_factory=dict)

    def plan(self) -> Settings:
        """The mode's settings object, every value checked (InvalidArgument naming the first bad one)."""
        check_question(self.text)
        mode = chosen_mode(self.mode)
        max_tokens = defaults.MAX_TOKENS if self.max_tokens is None and mode == "auto" else self.max_tokens
        scope: dict[str, Any] = {"collection": self.collection, "filter": self.filter}
        if max_tokens is not None:
            scope["max_tokens"] = max_tokens
        return for_mode(mode, **scope, **self.settings)
