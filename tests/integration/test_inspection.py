"""Inspecting an answer: the same answer as asking, the hits it was built from, and the map around them.

The inspector page draws what ``Reader.inspect`` returns, so each mark it
shows is checked here against what the retrieval did: the answer is the
one ``retrieve`` gives (every mode, with and without a budget, hybrid or
plain vector scores), each hit is a searched leaf with its score, and the
map holds every passage, every hit and the path from the root to each.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.errors import NotFound
from hrag_pg.operations.question import Question
from hrag_pg.operations.shapes import Inspection
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

QUESTIONS = [
    ("試用期間中の通勤手当と昼食手当は支給されますか", "hr"),
    ("私物端末を業務で使う場合の義務", "security"),
    ("ウイルス対策ソフト", "security"),
    ("How do I rotate the keys?", "manuals"),
    ("backup schedule and retention", None),
]
MODES = [
    ("auto", {}, None),
    ("auto", {"lexical_weight": 0.0}, 300),
    ("auto-merge", {}, None),
    ("auto-merge", {"lexical_weight": 0.0}, None),
    ("auto-merge", {"merge_threshold": 0.3}, 400),
    ("parent-child", {}, None),
    ("parent-child", {"lexical_weight": 0.0, "max_parents": 2}, None),
    ("parent-child", {"min_score": 0.1}, 500),
]


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_text((FIXTURES / "work_rules_ja.md").read_text(encoding="utf-8"), source="work_rules_ja.md",
                     collection="hr")
    hrag.ingest_text((FIXTURES / "security_policy_ja.md").read_text(encoding="utf-8"),
                     source="security_policy_ja.md", collection="security")
    hrag.ingest_text((FIXTURES / "guide.md").read_text(encoding="utf-8"), source="guide.md", collection="manuals")
    return hrag


@pytest.mark.parametrize(("mode", "settings", "max_tokens"), MODES)
def test_inspecting_gives_the_answer_asking_gives(hrag: HRAG, mode: str, settings: dict[str, object],
                                                   max_tokens: int | None) -> None:
    for text, collection in QUESTIONS:
        question = Question(text, mode=mode, max_tokens=max_tokens, collection=collection, settings=settings)
        inspection = hrag.reader.inspect(question)
        assert inspection.answer == hrag.reader.retrieve(question), (text, mode, settings)
        assert inspection.answer.results, (text, mode)


def test_every_hit_and_passage_is_on_the_map_with_its_path_from_the_root(hrag: HRAG) -> None:
    inspection = hrag.reader.inspect(Question("私物端末を業務で使う場合の義務", mode="auto-merge",
                                              collection="security"))
    nodes = {n.node_id: n for n in inspection.tree}
    assert inspection.hits and [h.rank for h in inspection.hits] == list(range(1, len(inspection.hits) + 1))
    assert [h.score for h in inspection.hits] == sorted((h.score for h in inspection.hits), reverse=True)
    for hit in inspection.hits:
        assert nodes[hit.node_id].hit_score == pytest.approx(hit.score) and nodes[hit.node_id].hit_rank == hit.rank
    for result in inspection.answer.results:
        node = nodes[result.node_id]
        assert node.passage_rank == result.rank and node.in_context
        assert node.token_count == result.token_count
    for node in nodes.values():  # each node's parent is on the map, up to the document's root
        assert node.parent_id is None or node.parent_id in nodes
        assert (node.parent_id is None) == (node.depth == 0)
    unmarked = [n for n in nodes.values() if n.hit_rank is None and n.passage_rank is None]
    assert unmarked, "the map shows the unhit children beside the hits"


def test_a_merged_node_shows_its_hit_children_and_the_others(hrag: HRAG) -> None:
    inspection = hrag.reader.inspect(Question("私物端末を業務で使う場合の義務", mode="auto-merge",
                                              collection="security", settings={"merge_threshold": 0.3}))
    merged = [r for r in inspection.answer.results if r.merged_from]
    assert merged, [r.explanation() for r in inspection.answer.results]
    children = [n for n in inspection.tree if n.parent_id == merged[0].node_id]
    assert len(children) == next(n.child_count for n in inspection.tree if n.node_id == merged[0].node_id)
    assert all(c.in_context for c in children)
    parent = {n.node_id: n.parent_id for n in inspection.tree}

    def holds_a_hit(child: uuid.UUID) -> bool:  # (a hit deeper down counts for the child it lies in)
        for hit in inspection.hits:
            node: uuid.UUID | None = hit.node_id
            while node is not None and node != child:
                node = parent.get(node)
            if node == child:
                return True
        return False

    covered = [c for c in children if holds_a_hit(c.node_id)]
    assert covered
    assert merged[0].hit_ratio == pytest.approx(len(covered) / len(children), abs=0.01)


def test_the_settings_are_the_modes_with_its_defaults_filled_in(hrag: HRAG) -> None:
    inspection = hrag.reader.inspect(Question("keys", mode="auto-merge", settings={"top_k": 7}))
    assert inspection.settings["mode"] == "auto-merge"
    assert inspection.settings["top_k"] == 7 and inspection.settings["merge_threshold"] > 0
    assert len(inspection.hits) <= 7


def test_an_unknown_collection_is_not_found_as_when_asking(hrag: HRAG) -> None:
    with pytest.raises(NotFound, match="no collection 'nope'"):
        hrag.reader.inspect(Question("keys", collection="nope"))


def test_the_async_reader_inspects_the_same(hrag: HRAG, db_url: str) -> None:
    question = Question("試用期間中の通勤手当", mode="auto", collection="hr")

    async def inspect() -> Inspection:
        async with AsyncHRAG(HRAG(db_url, embedder=HashingEmbedder())) as facade:
            return await facade.reader.inspect(question)

    assert asyncio.run(inspect()) == hrag.reader.inspect(question)
