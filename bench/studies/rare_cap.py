"""How many leaves the lexical candidates may come from: search_hybrid's rare_cap (300) against smaller caps.

    python bench/studies/rare_cap.py        # on the databases bench/budget.py ingested

``hrag.search_hybrid`` takes lexical candidates from the question's rarest
terms while their document frequencies add up to at most ``rare_cap`` leaves
(a constant, 300).  Those rows are most of the candidate stage's cost, so a
smaller cap is faster; the question is what it costs in recall.  For each
budget database (budget.DATABASES: the whole pgdocs, pystdlib and nodejs),
inside one transaction that is rolled back (the database is never left changed),
``search_hybrid`` is replaced by a copy whose cap is read from the setting
``hrag.rare_cap``, and every question is asked with each cap: the budget mode
at 1,000 / 2,000 / 4,000 tokens, auto-merge and parent-child (their
defaults, the context cut at 2,000 tokens as ``budget.py`` does), and the
budget mode's SQL p50 at 2,000 tokens.  Writes ``bench/studies/results/rare-cap.md``
with the commit, date and load average.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import common
from budget import ask_all, budget_databases, measured, recall_by_kind

from hrag_pg.embedders import default_embedder
from hrag_pg.evaluation import truncator_for

HERE = Path(__file__).resolve().parent

CAPS = (300, 200, 100)
BUDGETS = (1000, 2000, 4000)
SIGNATURE = "hrag.search_hybrid(vector, text, integer, text, jsonb, real, integer, real)"
CONSTANT = "rare_cap   constant integer := 300;"
SETTING = "rare_cap   integer := hrag._setting('hrag.rare_cap', 300)::integer;"


def with_settable_cap(conn: psycopg.Connection[Any]) -> None:
    """Replace search_hybrid, in the open transaction, by a copy whose cap is the setting hrag.rare_cap."""
    row = conn.execute(f"SELECT pg_get_functiondef('{SIGNATURE}'::regprocedure) AS source").fetchone()
    assert row is not None
    source: str = row["source"]
    if CONSTANT not in source:
        raise SystemExit(f"search_hybrid no longer declares {CONSTANT!r}: update bench/studies/rare_cap.py")
    conn.execute(source.replace(CONSTANT, SETTING))


def main() -> int:
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    lines = []
    for name, url, questions, vectors in budget_databases(embedder):
        with psycopg.connect(url, row_factory=dict_row) as conn:  # one transaction, rolled back below
            register_vector(conn)
            with_settable_cap(conn)
            for cap in CAPS:
                conn.execute(f"SET LOCAL hrag.rare_cap = {cap}")
                cells = []
                for mode, budgets in (("auto", BUDGETS), ("auto-merge", (0,)), ("parent-child", (0,))):
                    for budget in budgets:
                        contexts, times = ask_all(conn, questions, vectors, mode, budget or 2000)
                        narrow, broad, _ = recall_by_kind(questions, contexts, budget or 2000, truncator)
                        cells.append(f"{narrow:.2f} / {broad:.2f}")
                        if mode == "auto" and budget == 2000:
                            auto_p50 = statistics.median(times)
                lines.append(f"| {name} | {cap} | {' | '.join(cells)} | {auto_p50:.2f} |")
                print(lines[-1], flush=True)
            conn.rollback()
    header = [
        "# Lexical candidates from at most rare_cap leaves: 300 (search_hybrid's constant) against smaller caps",
        "",
        measured("studies/rare_cap.py"),
        "",
        "Recall narrow / broad; auto-merge and parent-child cut at 2,000 tokens; p50: the budget mode's SQL "
        "statement at 2,000 tokens, one pass.",
        "",
        "| database | rare_cap | auto @1,000 | auto @2,000 | auto @4,000 | auto-merge @2,000 | parent-child @2,000 "
        "| auto p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    out = HERE / "results" / "rare-cap.md"
    common.write_results(out, header + lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
