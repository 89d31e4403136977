"""Property: hrag.auto_merge_hits equals the pure-Python oracle on random trees."""

from __future__ import annotations

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pgvector.psycopg import register_vector

from tests.merge_oracle import auto_merge
from tests.sqltree import Spec, insert_tree


@st.composite
def trees(draw: st.DrawFn) -> Spec:
    max_depth = draw(st.integers(1, 5))
    counter = [0]

    def node(depth: int) -> Spec:
        counter[0] += 1
        key = f"n{counter[0]}"
        fan_out = draw(st.integers(1, 8)) if depth < max_depth and draw(st.booleans()) | (depth == 0) else 0
        return Spec(key, key, children=[node(depth + 1) for _ in range(fan_out)])

    return node(0)


@st.composite
def tree_and_hits(draw: st.DrawFn) -> tuple[Spec, dict[str, float], float]:
    root = draw(trees())
    keys: list[str] = []
    stack = [root]
    while stack:
        s = stack.pop()
        keys.append(s.key)
        stack.extend(s.children)
    hit_keys = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=12, unique=True))
    scores = {k: draw(st.floats(0.0, 1.0, width=32)) for k in hit_keys}
    threshold = draw(st.sampled_from([0.2, 0.25, 1 / 3, 0.5, 0.6, 2 / 3, 0.75, 1.0]))
    return root, scores, threshold


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tree_and_hits())
def test_auto_merge_hits_matches_the_reference_on_random_trees(
    conn: psycopg.Connection, case: tuple[Spec, dict[str, float], float]
) -> None:
    root, scores, threshold = case
    built = insert_tree(conn, root)
    key_of = {v: k for k, v in built.ids.items()}

    parent: dict[str, str | None] = {root.key: None}
    child_count: dict[str, int] = {}
    stack = [root]
    while stack:
        s = stack.pop()
        child_count[s.key] = len(s.children)
        for c in s.children:
            parent[c.key] = s.key
            stack.append(c)

    expected = auto_merge(parent, child_count, scores, threshold)
    rows = conn.execute(
        "SELECT node_id, score, merged_from, hit_ratio FROM hrag.auto_merge_hits(%s, %s::real[], %s::real)",
        ([built.ids[k] for k in scores], list(scores.values()), threshold),
    ).fetchall()
    got = {
        key_of[r[0]]: {"score": r[1], "merged_from": {key_of[m] for m in r[2]}, "hit_ratio": r[3]}
        for r in rows
    }
    assert set(got) == set(expected)
    for key, want in expected.items():
        assert got[key]["merged_from"] == want["merged_from"]
        assert got[key]["score"] == pytest.approx(want["score"], abs=1e-6)
        if want["hit_ratio"] is None:
            assert got[key]["hit_ratio"] is None
        else:
            assert got[key]["hit_ratio"] == pytest.approx(want["hit_ratio"], abs=1e-6)

    # No result holds a node together with one of its ancestors.
    for key in got:
        ancestor = parent[key]
        while ancestor is not None:
            assert ancestor not in got
            ancestor = parent[ancestor]
