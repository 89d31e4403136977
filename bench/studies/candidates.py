"""How many vector candidates the hybrid auto-merge and parent-child need: 3 x k (before 0013) against max(k, 30).

    python bench/studies/candidates.py        # on the databases bench/budget.py ingested

For each budget database (budget.DATABASES: the whole pgdocs, pystdlib and
nodejs), every question is asked in auto-merge and parent-child with their
defaults, once with 3 x k vector candidates (``search_hybrid``'s default
before revision 0013: 36 for auto-merge, 60 for parent-child, which also
ranks that many hits) and once with the default since 0013, max(k, 30)
(30 for both); recall after cutting the context at
2,000 tokens, as ``budget.py`` scores it, and the SQL statement's p50 (best of
3 per question).  Writes ``bench/studies/results/candidates.md`` with the commit,
date and load average.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import common
from budget import ask_all, budget_databases, measured, recall_by_kind

from hrag_pg import defaults
from hrag_pg.embedders import default_embedder
from hrag_pg.evaluation import truncator_for

HERE = Path(__file__).resolve().parent

BUDGET = 2000


def main() -> int:
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    lines = []
    for name, url, questions, vectors in budget_databases(embedder):
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            register_vector(conn)
            for mode in ("auto-merge", "parent-child"):
                k = defaults.TOP_K if mode == "auto-merge" else defaults.TOP_K_CHILDREN
                for label, candidates in (("3 × k (before 0013)", 3 * k), ("max(k, 30) (default)", None)):
                    contexts, times = ask_all(conn, questions, vectors, mode, BUDGET,
                                              candidates=candidates, repeat=3)
                    narrow, broad, _ = recall_by_kind(questions, contexts, BUDGET, truncator)
                    lines.append(f"| {name} | {mode} | {label} | {narrow:.2f} / {broad:.2f} | "
                                 f"{statistics.median(times):.2f} |")
                    print(lines[-1], flush=True)
    header = [
        "# Vector candidates for the hybrid auto-merge and parent-child: 3 × k against max(k, 30)",
        "",
        measured("studies/candidates.py"),
        "",
        f"| database | mode (defaults) | vector candidates | recall @{BUDGET:,} narrow / broad | SQL p50 ms |",
        "|---|---|---|---:|---:|",
    ]
    out = HERE / "results" / "candidates.md"
    common.write_results(out, header + lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
