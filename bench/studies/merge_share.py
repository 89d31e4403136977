"""When a merge keeps its whole value: the budget mode's hrag.auto_merge_share, measured.

    python bench/studies/merge_share.py        # on the databases bench/budget.py ingested

The budget mode (``hrag.retrieve``) takes the nodes on the hits' ancestor
paths greedily by evidence per tokens^0.5, a node replacing the taken nodes
inside it.  Since revision 0014 such a node is worth only what it adds (the
evidence not yet taken, per power of the tokens it adds) unless it is a
merge: since revision 0024, two or more hits inside it that cover at least
``hrag.auto_merge_share`` of its stored tokens (0014 to 0023: that share of
its children hit, 0.4).  0 is the rule before 0014 (every node keeps its
whole value); above 1 every replacing node is valued by what it adds.
For each budget database (budget.DATABASES: the whole pgdocs, pystdlib and
nodejs) every question is asked with each share (``SET``, nothing is
changed in the database): recall narrow / broad and tokens at 1,000 /
2,000 / 4,000 tokens, and the statement's p50 at 2,000 (best of 3 per
question).  Writes
``bench/studies/results/merge-share.md`` with the commit, date and load average.
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

#: 0: before 0014; 0.25: the default; 1.01: no node keeps its whole value.
SHARES = (0.0, 0.15, 0.2, 0.25, 0.3, 0.4, 1.01)


def main() -> int:
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    lines = []
    for name, url, questions, vectors in budget_databases(embedder):
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            register_vector(conn)
            for share in SHARES:
                conn.execute(f"SET hrag.auto_merge_share = {share}")
                cells, p50 = [], 0.0
                for budget in BUDGETS:
                    contexts, times = ask_all(conn, questions, vectors, "auto", budget,
                                              repeat=3 if budget == 2000 else 1)
                    narrow, broad, tokens = recall_by_kind(questions, contexts, budget, truncator)
                    cells.append(f"{narrow:.2f} / {broad:.2f} ({tokens:,.0f})")
                    if budget == 2000:
                        p50 = statistics.median(times)
                label = {0.0: "0 (before 0014)", 0.25: "0.25 (default)", 1.01: "never whole"}.get(share, f"{share}")
                lines.append(f"| {name} | {label} | {' | '.join(cells)} | {p50:.2f} |")
                print(lines[-1], flush=True)
    header = [
        "# The budget mode: when a node replacing taken nodes keeps its whole value "
        "(hrag.auto_merge_share, the share of its tokens two or more hits cover)",
        "",
        measured("studies/merge_share.py"),
        "",
        "Recall narrow / broad (mean tokens of the context) of `hrag.retrieve` with its defaults but the share; "
        "p50: the statement at 2,000 tokens, best of 3 per question.",
        "",
        "| database | merge share | @1,000 | @2,000 | @4,000 | p50 ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    out = HERE / "results" / "merge-share.md"
    common.write_results(out, header + lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
