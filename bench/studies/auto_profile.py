"""Where the budget mode's time goes: hrag.retrieve's functions, timed by PostgreSQL itself.

    python bench/studies/auto_profile.py --database hrag_bench_budget_pgdocs [--data-dir bench/.data/pg]

Each question of the set is embedded once and asked with ``hrag.retrieve(q,
text, 2000)`` (the budget mode's statement) in 3 passes after a warm-up, on a
connection with ``track_functions = 'pl'``; PostgreSQL's function statistics
(``pg_stat_user_functions``: calls, total and self time per function) then
say how much of a call each step takes.  ``search_leaves(20)`` is timed the
same way, as the yardstick the speed goal is stated in.  Function tracking
costs a little time per call, so the shares matter, not the milliseconds.
Writes ``bench/studies/results/auto-profile-<database>.md`` with the commit and load
average.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import common
from budget import budget_database

HERE = Path(__file__).resolve().parent

RETRIEVE = "SELECT * FROM hrag.retrieve(%(q)s, %(qt)s, 2000, 'bench')"
SEARCH_LEAVES = "SELECT * FROM hrag.search_leaves(%(q)s, 20, 'bench')"
PASSES = 3

#: The steps of one hrag.retrieve call, each the time of the functions named
#: (``self``: the function's own statements, not the functions it calls).
STEPS: list[tuple[str, list[tuple[str, str]]]] = [
    ("candidate stage: the ANN search (search_leaves, 30 candidates)", [("search_leaves", "total")]),
    (
        "candidate stage: the question's terms and their weights (lexical_terms, _term_weights)",
        [("_term_weights", "total")],
    ),
    (
        "candidate stage: lexical candidates, their scores and the fusion (search_hybrid's own statements)",
        [("search_hybrid", "self"), ("_check_query", "total"), ("_check_count", "total")],
    ),
    ("budget step: the hits' ancestor paths (_budget_candidates_*)", [("_budget_candidates_each", "total")]),
    (
        "budget step: weights, values and the greedy choice (_retrieve_hits' own statements)",
        [("_retrieve_hits", "self"), ("_setting", "total"), ("_check_hits", "total")],
    ),
    ("budget step: the chosen nodes' rows and texts (_budget_rows_*)", [("_budget_rows_each", "total")]),
    ("retrieve's own statements", [("retrieve", "self")]),
]


def function_times(
    url: str, statement: str, questions: list[dict[str, Any]], vectors: list[Any]
) -> tuple[dict[str, tuple[float, float]], int, float]:
    """Per tracked function: (total, self) ms per call of ``statement``; the number of calls; their p50 ms."""

    def ask(conn: psycopg.Connection[Any]) -> list[float]:
        took = []
        for q, v in zip(questions, vectors, strict=True):
            started = time.perf_counter()
            conn.execute(statement, {"q": v, "qt": q["question"]}).fetchall()
            took.append(time.perf_counter() - started)
        return took

    with psycopg.connect(url, autocommit=True) as warm:
        register_vector(warm)
        ask(warm)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_stat_reset()")
    took: list[float] = []
    with psycopg.connect(url, autocommit=True) as conn:  # its statistics are flushed when it closes
        register_vector(conn)
        conn.execute("SET track_functions = 'pl'")
        for _ in range(PASSES):
            took += ask(conn)
    calls = len(took)
    with psycopg.connect(url, autocommit=True) as admin:
        for _ in range(50):  # the closed backend's statistics arrive shortly after it exits
            rows = admin.execute(
                "SELECT funcname, total_time, self_time FROM pg_stat_user_functions WHERE schemaname = 'hrag'"
            ).fetchall()
            if rows:
                break
            time.sleep(0.1)
    return {name: (total / calls, own / calls) for name, total, own in rows}, calls, statistics.median(took) * 1000


def main() -> int:
    target = budget_database(__doc__)
    revision = common.git_revision()
    url, questions, vectors = target.url, target.questions, target.vectors

    leaves, _, leaves_p50 = function_times(url, SEARCH_LEAVES, questions, vectors)
    times, calls, retrieve_p50 = function_times(url, RETRIEVE, questions, vectors)
    yardstick = leaves["search_leaves"][0]
    whole = times["retrieve"][0]
    lines = [
        f"# Where the budget mode's time goes: {target.name}",
        "",
        f"{len(questions)} questions × {PASSES} passes after a warm-up ({calls} calls), "
        "`hrag.retrieve(q, text, 2000)` on a connection with `track_functions = 'pl'`; per call, the time "
        "PostgreSQL's function statistics give each step. Measured "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
        f"{os.getloadavg()[0]:.1f} (2 cores).",
        f"hrag-pg commit: {revision}",
        "",
        f"Yardstick: `search_leaves(q, 20)` takes {yardstick:.3f} ms inside the server per call "
        f"(p50 {leaves_p50:.2f} ms a statement, round trip included); `retrieve` takes {whole:.3f} ms "
        f"inside the server ({whole / yardstick:.2f}× the yardstick; p50 {retrieve_p50:.2f} ms a statement).",
        "",
        "| step | ms per call | share of retrieve | ÷ search_leaves(20) |",
        "|---|---:|---:|---:|",
    ]
    accounted = 0.0
    for label, parts in STEPS:
        ms = sum(times.get(name, (0.0, 0.0))[0 if kind == "total" else 1] for name, kind in parts)
        accounted += ms
        lines.append(f"| {label} | {ms:.3f} | {ms / whole:.0%} | {ms / yardstick:.2f}× |")
    stage = times["search_hybrid"][0]
    lines += [
        f"| **the candidate stage** (search_hybrid, all of it) | {stage:.3f} | {stage / whole:.0%} | "
        f"{stage / yardstick:.2f}× |",
        f"| **the budget step** (_retrieve_hits, all of it) | {times['_retrieve_hits'][0]:.3f} | "
        f"{times['_retrieve_hits'][0] / whole:.0%} | {times['_retrieve_hits'][0] / yardstick:.2f}× |",
        f"| **retrieve** | {whole:.3f} | 100% | {whole / yardstick:.2f}× |",
        "",
        f"The steps add up to {accounted:.3f} ms of {whole:.3f}.",
    ]
    common.write_results(HERE / "results" / f"auto-profile-{target.name}.md", lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
