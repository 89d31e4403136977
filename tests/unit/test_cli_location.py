"""Where `hrag query` says a passage is: its source, then its heading path, nothing said twice."""

from __future__ import annotations

import uuid

import pytest

from hrag_pg.cli.output import heading_after_source
from hrag_pg.models import RetrievalResult


def result(heading_path: list[str], *, source: str | None = "shlex.py", title: str | None = None) -> RetrievalResult:
    return RetrievalResult(mode="auto", node_id=uuid.UUID(int=7), document_id=uuid.UUID(int=1), title=title,
                           heading_path=heading_path, content="x", score=0.5, rank=1, source=source)


@pytest.mark.parametrize(("heading_path", "expected"), [
    (["shlex.py"], ""),                                  # a Python file's top group: the source alone
    (["shlex.py", "class shlex"], "class shlex"),
    (["BUG REPORTS", "Where to send"], "BUG REPORTS › Where to send"),
    (["", "Notes"], "Notes"),
])
def test_the_heading_path_does_not_repeat_the_source(heading_path: list[str], expected: str) -> None:
    assert heading_after_source(result(heading_path)) == expected


def test_a_result_without_a_heading_path_is_named_by_its_title_or_by_its_source_alone() -> None:
    # (not by its node id: the line below the breadcrumb shows it already)
    assert heading_after_source(result([], title="Synopsis")) == "Synopsis"
    assert heading_after_source(result([])) == ""
