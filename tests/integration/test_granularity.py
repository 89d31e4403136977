"""Granularity that follows the question, whatever the model (issue #49), from the Python API.

* a model nobody here has seen, whose cosines are another model's squeezed
  towards 1 (as e5's are against MiniLM's), gets the same contexts: scores
  are read above the question's background, not above a constant per model;
* parent-child's ``max_parents`` is a ceiling, not a quota, and auto-merge
  counts hits by evidence: a hit under ``min_relative_score`` (0.6) of the
  best is none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psycopg
import pytest

from hrag_pg import defaults
from hrag_pg.api import HRAG
from hrag_pg.ingest.tokens import TokenCounter
from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
REGULATIONS = Path(__file__).resolve().parents[2] / "bench" / "corpora" / "regulations-ja"
QUESTIONS = (
    "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？",
    "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください",
    "私物のスマートフォンにウイルス対策ソフトを入れる必要はありますか？",
    "パスワードは何文字以上にしなければなりませんか？",
    "退職届はいつまでに出せばよいですか？",
)


class SqueezedEmbedder:
    """A model of its own: another model's vectors with a constant last coordinate.

    With ``v`` a unit vector of the first ``dim - 1`` coordinates, ``(a·v, b)``
    normalised has cosines ``(a²·cos + b²) / (a² + b²)`` with any other: the
    base model's, squeezed towards 1 as e5's are (``offset=0``: the base
    model itself, padded).  Identical texts keep cosine 1.
    """

    def __init__(self, name: str, offset: float) -> None:
        self.model_name = name
        self.offset = offset
        self.base = HashingEmbedder(dim=383)

    @property
    def dim(self) -> int:
        return 384

    @property
    def token_counter(self) -> TokenCounter:
        return self.base.token_counter

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        base = self.base.embed(texts)
        out = np.hstack([base, np.full((len(base), 1), self.offset, dtype=np.float32)])
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _contexts(hrag: HRAG, collection: str) -> list[list[tuple[str | None, str, str]]]:
    """Each question's budget-mode context: (source, heading path, text) per passage.

    Sorted: node ids differ between collections, and passages of equal score
    rank by id.
    """
    return [sorted((r.source, " › ".join(r.heading_path), r.content) for r in hrag.retrieve(q, collection=collection))
            for q in QUESTIONS]


def test_a_model_nobody_has_seen_gets_the_same_contexts_as_the_model_it_squeezes(db_url: str) -> None:
    files = [FIXTURES / "work_rules_ja.md", FIXTURES / "security_policy_ja.md"]
    plain = HRAG(db_url, embedder=SqueezedEmbedder("plain-test", 0.0))
    squeezed = HRAG(db_url, embedder=SqueezedEmbedder("squeezed-test", 2.0))
    plain.ingest(files, collection="plain")
    squeezed.ingest(files, collection="squeezed")
    with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql")) as conn:
        backgrounds = conn.execute(
            "SELECT s.collection, (s.embedding_sum <#> s.embedding_sum) * -1 / s.search_targets ^ 2 "
            "FROM hrag.collection_sizes s ORDER BY 1").fetchall()
    # (the squeezed model's texts are far closer to each other on average: e5 against MiniLM)
    assert backgrounds[1][1] > backgrounds[0][1] + 0.5, backgrounds

    assert _contexts(squeezed, "squeezed") == _contexts(plain, "plain")

    # Read above a constant instead (0 for a model nobody measured), the squeezed cosines are all
    # near 1, every hit looks as good as the best, and the contexts differ.
    with psycopg.connect(db_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as conn:
        conn.execute("CREATE OR REPLACE FUNCTION hrag._question_background(query vector, collections text[]) "
                     "RETURNS real "
                     "LANGUAGE sql STABLE AS 'SELECT 0::real'")
    assert _contexts(squeezed, "squeezed") != _contexts(plain, "plain")


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest([FIXTURES / "work_rules_ja.md", FIXTURES / "security_policy_ja.md",
              REGULATIONS / "07-joho-system-riyou.md", REGULATIONS / "08-chingin.md"])
    return h


@pytest.mark.parametrize("question", QUESTIONS)
def test_parent_child_returns_no_parent_far_below_the_first(hrag: HRAG, question: str) -> None:
    results = hrag.parent_child(question)
    assert results and len(results) <= defaults.MAX_PARENTS
    assert all(r.score >= defaults.MIN_RELATIVE_SCORE * results[0].score for r in results)


def test_max_parents_is_a_ceiling_not_a_quota(hrag: HRAG) -> None:
    """Where only one parent holds evidence, one comes back; without the floor, four (the quota)."""
    counts = {q: len(hrag.parent_child(q)) for q in QUESTIONS}
    assert min(counts.values()) < defaults.MAX_PARENTS, counts
    assert all(len(hrag.parent_child(q, ParentChildSettings(min_relative_score=None))) == defaults.MAX_PARENTS
               for q in QUESTIONS)


@pytest.mark.parametrize("question", QUESTIONS)
def test_auto_merge_counts_no_hit_far_below_the_best(hrag: HRAG, question: str) -> None:
    results = hrag.auto_merge(question)
    best = max(r.score for r in results)
    assert all(r.score >= defaults.MIN_RELATIVE_SCORE * best for r in results)
    unfloored = hrag.auto_merge(question, AutoMergeSettings(min_relative_score=None))
    assert len(unfloored) >= len(results)


def test_the_floor_changes_nothing_for_the_budget_mode_which_weighs_hits_itself(hrag: HRAG) -> None:
    assert BudgetSettings().min_relative_score is None
    assert ParentChildSettings().min_relative_score == AutoMergeSettings().min_relative_score == 0.5


