"""Property: parent-child equals the pure-Python oracle on random nested trees.

The trees nest sections inside sections (and groups, which parent-child
expands through), with leaves at several depths, one or two documents, and
hits anywhere (leaves, sections, groups, a root) given in an order unrelated
to their scores.  ``hrag.parent_child_hits`` takes the arrays' order as the
rank order; ``hrag.parent_child`` ranks the hits its search finds by score.
Either way the result must be what :func:`tests.parent_child_oracle.parent_child`
computes, and in particular:

* no returned parent together with one of its ancestors (a parent
  overlapping one already kept is skipped);
* at most ``max_parents`` rows;
* the parents in first-seen order of the ranked hits, with their matched
  children and best score.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pgvector.psycopg import register_vector

from tests.parent_child_oracle import parent_child
from tests.sqltree import Spec, insert_tree, unit


@dataclass(frozen=True)
class Case:
    documents: list[Spec]
    #: the hits in rank order (the arrays' order); None is an id the database does not know
    ranked: list[str | None]
    scores: dict[str, float]
    max_parents: int
    top_k_children: int | None



def _walk(spec: Spec) -> list[Spec]:
    out, stack = [], [spec]
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(s.children)
    return out


def _embed_hits(documents: list[Spec], scores: dict[str, float]) -> None:
    """Give each hit a unit vector whose cosine with axis 0 is its score; other nodes none."""
    for doc in documents:
        for s in _walk(doc):
            score = scores.get(s.key)
            s.embedding = None if score is None else {0: score, 1: math.sqrt(max(1.0 - score * score, 0.0))}


@st.composite
def nested_documents(draw: st.DrawFn) -> list[Spec]:
    counter = [0]

    def key(doc: int) -> str:
        counter[0] += 1
        return f"d{doc}.{counter[0]}"

    def section(doc: int, depth: int, max_depth: int) -> Spec:
        k = key(doc)
        children: list[Spec] = []
        if depth < max_depth:
            for what in draw(st.lists(st.sampled_from(["leaf", "section", "section", "group"]),
                                      min_size=0 if depth else 1, max_size=4)):
                if what == "leaf":
                    leaf = key(doc)
                    children.append(Spec(leaf, leaf, kind="paragraph"))
                elif what == "section":
                    children.append(section(doc, depth + 1, max_depth))
                else:
                    g = key(doc)
                    leaves = [key(doc) for _ in range(draw(st.integers(1, 3)))]
                    children.append(Spec(g, "", kind="group",
                                         children=[Spec(v, v, kind="paragraph") for v in leaves]))
        return Spec(k, k, kind="document" if depth == 0 else "section", children=children)

    return [section(doc, 0, draw(st.integers(2, 5))) for doc in range(draw(st.integers(1, 2)))]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    documents = draw(nested_documents())
    keys = [s.key for doc in documents for s in _walk(doc)]
    hit_keys = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=12, unique=True))
    # distinct scores a 1/64 apart: the vector search ranks them exactly
    grid = draw(st.lists(st.integers(1, 63), min_size=len(hit_keys), max_size=len(hit_keys), unique=True))
    scores = {k: g / 64 for k, g in zip(hit_keys, grid, strict=True)}
    ranked: list[str | None] = list(draw(st.permutations(hit_keys)))  # unrelated to the scores
    for _ in range(draw(st.integers(0, 2))):
        ranked.insert(draw(st.integers(0, len(ranked))), None)
    _embed_hits(documents, scores)
    return Case(documents, ranked, scores, max_parents=draw(st.integers(1, 6)),
                top_k_children=draw(st.one_of(st.none(), st.integers(1, len(ranked) + 1))))


def _nested_case(ranked: list[str], max_parents: int = 4) -> Case:
    """Section A holds leaf a and section A1 (leaves a1, a2); section B holds leaf b."""
    doc = Spec("root", "root", kind="document", children=[
        Spec("A", "A", children=[
            Spec("a", "a", kind="paragraph"),
            Spec("A1", "A1", children=[Spec("a1", "a1", kind="paragraph"), Spec("a2", "a2", kind="paragraph")]),
        ]),
        Spec("B", "B", children=[Spec("b", "b", kind="paragraph")]),
    ])
    scores = {k: (len(ranked) - i) / 64 for i, k in enumerate(ranked)}
    _embed_hits([doc], scores)
    return Case([doc], list(ranked), scores, max_parents, None)


#: The subsection A1 first, then A around it: A is skipped.
SMALL_THEN_LARGE = _nested_case(["a1", "a", "b"])
#: A first, then A1 inside it: A1 is skipped.
LARGE_THEN_SMALL = _nested_case(["a", "a2", "b", "a1"])


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


def _insert(conn: psycopg.Connection, case: Case) -> tuple[dict[str, uuid.UUID], dict, dict]:
    ids: dict[str, uuid.UUID] = {}
    parent: dict[str, str | None] = {}
    kind: dict[str, str] = {}
    for doc in case.documents:
        ids.update(insert_tree(conn, doc).ids)
        parent[doc.key] = None
        for s in _walk(doc):
            kind[s.key] = s.kind
            for c in s.children:
                parent[c.key] = s.key
    return ids, parent, kind


def _check(rows: list[tuple], expected: list[dict], ids: dict[str, uuid.UUID], parent: dict,
           max_parents: int) -> None:
    key_of = {v: k for k, v in ids.items()}
    got = [key_of[r[0]] for r in rows]

    def ancestors(k: str) -> set[str]:
        out, up = set(), parent[k]
        while up is not None:
            out.add(up)
            up = parent[up]
        return out

    for k in got:
        assert not ancestors(k) & set(got), f"{k} returned together with its ancestor {ancestors(k) & set(got)}"
    assert len(rows) <= max_parents
    assert got == [e["parent"] for e in expected], "the parents, in first-seen order of the ranked hits"
    for row, want in zip(rows, expected, strict=True):
        _, score, matched, rank = row
        assert rank == want["rank"]
        assert [key_of.get(m) for m in matched] == want["matched"], f"matched children of {want['parent']}"
        assert score == pytest.approx(want["score"], abs=1e-5)


PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@PROPERTY
@given(case=cases())
@example(case=SMALL_THEN_LARGE)
@example(case=LARGE_THEN_SMALL)
@example(case=_nested_case(["a1", "a", "b"], max_parents=1))
def test_parent_child_hits_keeps_first_seen_parents_in_array_order_never_one_with_its_ancestor(
    conn: psycopg.Connection, case: Case
) -> None:
    try:
        ids, parent, kind = _insert(conn, case)
        ranked = [(k, case.scores[k]) if k is not None else (None, 0.99) for k in case.ranked]
        node_ids = [ids[k] if k is not None else uuid.uuid4() for k, _ in ranked]
        rows = conn.execute(
            "SELECT node_id, score, matched_children, rank FROM hrag.parent_child_hits(%s, %s::real[], %s, %s)",
            (node_ids, [s for _, s in ranked], case.max_parents, case.top_k_children),
        ).fetchall()
        expected = parent_child(parent, kind, ranked, case.max_parents, case.top_k_children)
        _check(rows, expected, ids, parent, case.max_parents)
    finally:
        conn.rollback()  # each example on an empty database


@PROPERTY
@given(case=cases())
@example(case=SMALL_THEN_LARGE)
@example(case=LARGE_THEN_SMALL)
def test_parent_child_keeps_first_seen_parents_in_score_order_never_one_with_its_ancestor(
    conn: psycopg.Connection, case: Case
) -> None:
    top_k = case.top_k_children or 20
    try:
        ids, parent, kind = _insert(conn, case)
        # An exact search (no HNSW), so the hits and their order are known: every hit, by score.
        conn.execute("SET LOCAL enable_indexscan = off")
        rows = conn.execute(
            "SELECT node_id, score, matched_children, rank FROM hrag.parent_child(%s, %s, %s)",
            (unit({0: 1.0}), top_k, case.max_parents),
        ).fetchall()
        searched = sorted(case.scores.items(), key=lambda kv: -kv[1])[:max(top_k, 10 * case.max_parents)]
        ranked = [(k, s) for k, s in searched if parent[k] is not None]  # roots are never children
        expected = parent_child(parent, kind, ranked, case.max_parents, top_k)
        _check(rows, expected, ids, parent, case.max_parents)
    finally:
        conn.rollback()
