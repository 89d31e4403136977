"""What users read: explanations in their own words and numbers, URLs as they typed them."""

from __future__ import annotations

import uuid

import pytest

from hrag_pg import db
from hrag_pg.models import RetrievalResult


def _result(merged: int, hit_ratio: float | None) -> RetrievalResult:
    return RetrievalResult(mode="auto-merge", node_id=uuid.uuid4(), document_id=uuid.uuid4(), depth=1,
                           title="t", heading_path=["t"], content="c", score=0.5, rank=1,
                           merged_from=[uuid.uuid4() for _ in range(merged)], hit_ratio=hit_ratio)


@pytest.mark.parametrize(("merged", "ratio", "said"), [
    (1, 0.5, "merged from 1 hit (hit ratio 0.50)"), (3, 0.75, "merged from 3 hits (hit ratio 0.75)"),
    (1, None, "absorbed 1 hit below it"), (2, None, "absorbed 2 hits below it")])
def test_a_merge_is_explained_with_the_right_number_of_hits(merged: int, ratio: float | None, said: str) -> None:
    assert _result(merged, ratio).explanation() == said


def test_a_url_in_a_message_hides_the_password_and_shows_the_socket_directory_as_typed() -> None:
    shown = db.redact("postgresql+psycopg://postgres:secret@/hrag?host=/tmp/x y/pgdata&port=5432")
    assert "secret" not in shown and "***" in shown
    assert shown.endswith("?host=/tmp/x y/pgdata&port=5432")
    assert db.redact("postgresql://u:pw@db.example:5432/app") == "postgresql://u:***@db.example:5432/app"
