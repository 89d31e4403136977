"""Parent-child and auto-merge under a token budget: the one statement against the plain call.

    python bench/context_latency.py --database hrag_bench_budget_pgdocs [--questions ...]

Each question is embedded once; then, in 3 passes after a warm-up, every
statement the Python layer sends runs for it over the local socket: the plain
parent-child and auto-merge calls, the same modes with ``max_context_tokens``
2,000 (results and fitting in one statement, ``hrag._fit_budget``), and the
budget mode.  A statement's time for a question is its best pass; the table
gives the p50 over the questions.  Writes
``bench/results/context-latency-<database>.md`` with the commit and load average.
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
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from budget import budget_database

from hrag_pg import defaults, queries

BUDGET = 2000
PLANS = {
    "parent-child": lambda s: queries.plan_parent_child(s, defaults.TOP_K_CHILDREN, defaults.MAX_PARENTS, None),
    "parent-child, max_context_tokens": lambda s: queries.plan_parent_child_context(
        s, defaults.TOP_K_CHILDREN, defaults.MAX_PARENTS, None, BUDGET),
    "auto-merge": lambda s: queries.plan_auto_merge(s, defaults.TOP_K, defaults.MERGE_THRESHOLD,
                                                    defaults.MAX_HIT_SHARE),
    "auto-merge, max_context_tokens": lambda s: queries.plan_auto_merge_context(
        s, defaults.TOP_K, defaults.MERGE_THRESHOLD, defaults.MAX_HIT_SHARE, BUDGET),
    "auto (budget mode)": lambda s: queries.plan_retrieve(s, defaults.AUTO_TOP_K, BUDGET),
}
PLAIN = {"parent-child, max_context_tokens": "parent-child", "auto-merge, max_context_tokens": "auto-merge"}


def main() -> int:
    target = budget_database(__doc__)
    revision = common.git_revision()
    best: dict[str, list[float]] = {name: [float("inf")] * len(target.questions) for name in PLANS}
    with psycopg.connect(target.url, row_factory=dict_row) as conn:
        register_vector(conn)
        for warm in (True, False, False, False):
            for i, (q, v) in enumerate(zip(target.questions, target.vectors, strict=True)):
                search = queries.Search(query=v, text=q["question"], collection="bench")
                for name, plan in PLANS.items():
                    sql, params = plan(search)
                    started = time.perf_counter()
                    conn.execute(sql, params).fetchall()
                    if not warm:
                        best[name][i] = min(best[name][i], (time.perf_counter() - started) * 1000)
    p50 = {name: statistics.median(values) for name, values in best.items()}
    lines = [f"# Contexts under a token budget: {target.name}", "",
             f"{len(target.questions)} questions, each statement's best of 3 passes after a warm-up, one statement "
             f"over a unix socket, budget {BUDGET:,} tokens. Measured "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
             f"{os.getloadavg()[0]:.1f} (2 cores).",
             f"hrag-pg commit: {revision}", "",
             "| statement | p50 ms | ÷ the plain call |", "|---|---:|---:|"]
    for name, value in p50.items():
        ratio = f"{value / p50[PLAIN[name]]:.2f}×" if name in PLAIN else ""
        lines.append(f"| {name} | {value:.2f} | {ratio} |")
    common.write_results(common.RESULTS_DIR / f"context-latency-{target.name}.md", lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
