"""Budget mode speed: hrag.retrieve against the ANN step alone, on a database bench/budget.py ingested.

    python bench/studies/auto_latency.py --database hrag_bench_budget_pgdocs_small [--data-dir bench/.data/pg]

Each question of the set is embedded once; then, in 3 passes after a warm-up,
the same vectors go to ``hrag.search_leaves(q, 20)``, ``hrag.search_hybrid``
(the candidate stage), ``hrag.auto_merge`` and ``hrag.retrieve(q, text, 2000)``,
each one SQL statement over the local socket.  Writes
``bench/studies/results/auto-latency-<database>.md`` with the commit and load average.
"""

from __future__ import annotations

import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import common
from budget import budget_database

HERE = Path(__file__).resolve().parent

STATEMENTS = {
    "search_leaves(k=20)": "SELECT * FROM hrag.search_leaves(%(q)s, 20, 'bench')",
    "search_hybrid(k=30): the candidate stage": "SELECT * FROM hrag.search_hybrid(%(q)s, %(qt)s, 30, 'bench')",
    "auto_merge(top_k=12)": "SELECT * FROM hrag.auto_merge(%(q)s, 12, 0.5, 'bench')",
    "retrieve(max_tokens=2000): the budget mode": "SELECT * FROM hrag.retrieve(%(q)s, %(qt)s, 2000, 'bench')",
}


def main() -> int:
    target = budget_database(__doc__)
    revision = common.git_revision()
    questions, vectors = target.questions, target.vectors
    conn = psycopg.connect(target.url)
    register_vector(conn)
    timings: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    for warm in (True, False, False, False):
        for q, v in zip(questions, vectors, strict=True):
            for name, sql in STATEMENTS.items():
                started = time.perf_counter()
                conn.execute(sql, {"q": v, "qt": q["question"]}).fetchall()
                if not warm:
                    timings[name].append((time.perf_counter() - started) * 1000)
    base = statistics.median(timings["search_leaves(k=20)"])
    load = os.getloadavg()[0]
    lines = [f"# Budget mode latency: {target.name}", "",
             f"{len(questions)} questions × 3 passes after a warm-up, one SQL statement each over a unix socket. "
             f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load:.1f} "
             "(2 cores).",
             f"hrag-pg commit: {revision}", "",
             "| statement | p50 ms | p95 ms | p50 ÷ search_leaves |", "|---|---:|---:|---:|"]
    for name, values in timings.items():
        values.sort()
        p95 = values[int(0.95 * (len(values) - 1))]
        lines.append(f"| {name} | {statistics.median(values):.2f} | {p95:.2f} | "
                     f"{statistics.median(values) / base:.2f}× |")
    common.write_results(HERE / "results" / f"auto-latency-{target.name}.md", lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
