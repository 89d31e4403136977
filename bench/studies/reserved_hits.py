"""How many of the best hits keep room in the budget: the budget mode's hrag.auto_reserved_hits, measured.

    python bench/studies/reserved_hits.py     # on budget.DATABASES (run.py --full and budget.py ingest them)

The budget mode (``hrag.retrieve``) takes the nodes on the hits' ancestor
paths greedily by evidence per tokens^0.5.  Since revision 0016 the best
``hrag.auto_reserved_hits`` hits keep room: a node is taken only if the
budget still holds those of them it does not contain, so a large section of
many weak hits cannot crowd out the best passage elsewhere.  0 is the rule
before 0016.  For each database of ``budget.DATABASES`` (the whole pgdocs,
pystdlib and nodejs) every question is asked with each count (``SET``,
nothing is changed in the database): recall narrow / broad and tokens at
1,000 / 2,000 / 4,000 tokens, and the statement's p50 at 2,000 (best of 3
per question).  Writes ``bench/studies/results/reserved-hits.md`` with the commit,
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
from budget import BUDGETS, ask_all, budget_databases, measured, recall_by_kind

from hrag_pg.embedders import default_embedder
from hrag_pg.evaluation import truncator_for

HERE = Path(__file__).resolve().parent

#: 0: before 0016; 2: the default.
COUNTS = (0, 1, 2, 3, 4, 6)


def main() -> int:
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    lines = []
    for name, url, questions, vectors in budget_databases(embedder):
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            register_vector(conn)
            for count in COUNTS:
                conn.execute(f"SET hrag.auto_reserved_hits = {count}")
                cells, p50 = [], 0.0
                for budget in BUDGETS:
                    contexts, times = ask_all(conn, questions, vectors, "auto", budget,
                                              repeat=3 if budget == 2000 else 1)
                    narrow, broad, tokens = recall_by_kind(questions, contexts, budget, truncator)
                    cells.append(f"{narrow:.2f} / {broad:.2f} ({tokens:,.0f})")
                    if budget == 2000:
                        p50 = statistics.median(times)
                label = {0: "0 (before 0016)", 2: "2 (default)"}.get(count, f"{count}")
                lines.append(f"| {name} | {label} | {' | '.join(cells)} | {p50:.2f} |")
                print(lines[-1], flush=True)
    header = [
        "# The budget mode: how many of the best hits keep room in the budget (hrag.auto_reserved_hits)",
        "",
        measured("studies/reserved_hits.py"),
        "",
        "Recall narrow / broad (mean tokens of the context) of `hrag.retrieve` with its defaults but the count; "
        "p50: the statement at 2,000 tokens, best of 3 per question.",
        "",
        "| database | reserved hits | @1,000 | @2,000 | @4,000 | p50 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    out = HERE / "results" / "reserved-hits.md"
    common.write_results(out, header + lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
