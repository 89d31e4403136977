"""Revision 0011: on a single node the per-document steps run once for all documents of the hits.

The retrieval functions' per-document steps (``hrag._*_document(doc, ...)``) are called once per
document on Citus, where each call is delegated to the document's worker; without Citus the
coordinator loops call them once with ``doc`` NULL.  These tests prove both halves on a single
node: one call whatever the number of documents, and the same rows as one call per document.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from hrag_pg import db, migrate
from hrag_pg.api import HRAG
from tests.embedders import HashingEmbedder

EXAMPLES = Path(migrate.MIGRATIONS_DIR).parent / "examples"


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection]:
    """The three bundled example documents, and a connection to them."""
    report = HRAG(db_url, embedder=HashingEmbedder()).ingest([EXAMPLES], collection="c", stop_on_error=True)
    assert [r.status for r in report.results] == ["created"] * 3
    with psycopg.connect(db.libpq_url(db_url)) as connection:
        yield connection


def _hits(conn: psycopg.Connection, seed: int) -> tuple[list[object], list[object], list[float]]:
    """Leaves and inner nodes from every document, in a random order with random scores."""
    rows = conn.execute("SELECT id, document_id FROM hrag.nodes WHERE depth > 0 ORDER BY id").fetchall()
    rng = random.Random(seed)
    by_document: dict[object, list[tuple[object, object]]] = {}
    for node, doc in rows:
        by_document.setdefault(doc, []).append((node, doc))
    assert len(by_document) == 3
    picked = [hit for hits in by_document.values() for hit in rng.sample(hits, min(4, len(hits)))]
    rng.shuffle(picked)
    return [i for i, _ in picked], [d for _, d in picked], [round(rng.uniform(0.2, 0.9), 3) for _ in picked]


def _calls(conn: psycopg.Connection, function: str) -> int:
    row = conn.execute("SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions "
                       "WHERE schemaname = 'hrag' AND funcname = %s", (function,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(("statement", "steps"), [
    ("SELECT * FROM hrag.auto_merge_hits(%(ids)s::uuid[], %(scores)s::real[], 0.3)", ["_auto_merge_document"]),
    ("SELECT * FROM hrag.parent_child_hits(%(ids)s::uuid[], %(scores)s::real[], 5)",
     ["_parents_document", "_node_rows_document"]),
    ("SELECT * FROM hrag.retrieve_hits(%(ids)s::uuid[], %(scores)s::real[], 3000)",
     ["_budget_candidates_document", "_budget_rows_document"]),
])
def test_without_citus_each_per_document_step_runs_once_for_hits_from_several_documents(
    conn: psycopg.Connection, statement: str, steps: list[str],
) -> None:
    ids, docs, scores = _hits(conn, 1)
    assert len(set(docs)) == 3  # one call per document would be three
    conn.execute("SET track_functions = 'pl'")
    rows = conn.execute(statement, {"ids": ids, "scores": scores}).fetchall()
    assert rows
    assert {s: _calls(conn, s) for s in steps} == dict.fromkeys(steps, 1)


def _one_call_and_per_document(conn: psycopg.Connection, sql: str, ids: list[object], docs: list[object],
                               extra: dict[str, object]) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The step's rows for doc NULL over all hits, and the union of one call per document (sorted)."""
    together = conn.execute(sql, {"doc": None, "ids": ids, "ords": list(range(1, len(ids) + 1)), **extra}).fetchall()
    apart: list[tuple[object, ...]] = []
    for doc in sorted(set(docs), key=str):
        mine = [(i, o) for o, (i, d) in enumerate(zip(ids, docs, strict=True), start=1) if d == doc]
        mine_extra = {k: [v[o - 1] for _, o in mine] if isinstance(v, list) and len(v) == len(ids) else v
                      for k, v in extra.items()}
        apart += conn.execute(sql, {"doc": doc, "ids": [i for i, _ in mine], "ords": [o for _, o in mine],
                                    **mine_extra}).fetchall()
    return sorted(together, key=repr), sorted(apart, key=repr)


@pytest.mark.parametrize("seed", range(8))
def test_a_per_document_step_over_all_documents_returns_the_union_of_its_per_document_calls(
    conn: psycopg.Connection, seed: int,
) -> None:
    """doc NULL (the single-node path) and one call per document (the Citus path) give the same rows."""
    ids, docs, scores = _hits(conn, seed)
    weights = [s * 2 for s in scores]
    steps = {
        "SELECT * FROM hrag._auto_merge_document(%(doc)s, %(ids)s::uuid[], %(scores)s::real[], 0.3)":
            {"scores": scores},
        "SELECT * FROM hrag._parents_document(%(doc)s, %(ids)s::uuid[], %(ords)s::bigint[])": {},
        "SELECT * FROM hrag._node_rows_document(%(doc)s, %(ids)s::uuid[])": {},
        "SELECT * FROM hrag._budget_candidates_document(%(doc)s, %(ids)s::uuid[], %(scores)s::real[], "
        "%(weights)s::float8[])": {"scores": scores, "weights": weights},
        # every hit picked as itself, and its root picked over it: what it absorbed
        "SELECT * FROM hrag._budget_rows_document(%(doc)s, %(ids)s::uuid[], %(why)s::text[], %(children)s::int[], "
        "%(ids)s::uuid[], %(scores)s::real[], false)":
            {"scores": scores, "why": ["hit"] * len(ids), "children": [0] * len(ids)},
    }
    for sql, extra in steps.items():
        together, apart = _one_call_and_per_document(conn, sql, ids, docs, extra)
        assert together, sql
        assert together == apart, sql
    roots = conn.execute("SELECT array_agg(id ORDER BY id), array_agg(document_id ORDER BY id) FROM hrag.nodes "
                         "WHERE parent_id IS NULL").fetchone()
    assert roots is not None
    sql = ("SELECT * FROM hrag._budget_rows_document(%(doc)s, %(roots)s::uuid[], %(why)s::text[], %(children)s::int[], "
           "%(ids)s::uuid[], %(scores)s::real[], false)")
    together = conn.execute(sql, {"doc": None, "roots": roots[0], "why": ["merged"] * len(roots[0]),
                                  "children": [1] * len(roots[0]), "ids": ids, "scores": scores}).fetchall()
    apart = []
    for root, doc in zip(roots[0], roots[1], strict=True):
        mine = [(i, s) for i, d, s in zip(ids, docs, scores, strict=True) if d == doc]
        apart += conn.execute(sql, {"doc": doc, "roots": [root], "why": ["merged"], "children": [1],
                                    "ids": [i for i, _ in mine], "scores": [s for _, s in mine]}).fetchall()
    assert sorted(together, key=repr) == sorted(apart, key=repr)
    assert any(r[7] for r in together), "a root absorbed hits"
