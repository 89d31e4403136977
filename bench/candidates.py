"""How many vector candidates the hybrid auto-merge and parent-child need: 3 x k (before 0013) against max(k, 30).

    python bench/candidates.py        # on the databases bench/budget.py ingested

For each budget database (the whole pgdocs, 40 pgdocs files, 40 pystdlib
files), every question is asked in auto-merge and parent-child with their
defaults, once with 3 x k vector candidates (``search_hybrid``'s default
before revision 0013: 36 for auto-merge, 60 for parent-child, which also
ranks that many hits) and once with the default since 0013, max(k, 30)
(30 for both); recall after cutting the context at
2,000 tokens, as ``budget.py`` scores it, and the SQL statement's p50 (best of
3 per question).  Writes ``bench/results/candidates.md`` with the commit,
date and load average.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import benchdb  # noqa: E402
import common  # noqa: E402
from budget import COLLECTION, plan, recall_by_kind  # noqa: E402
from run import git_revision  # noqa: E402

from hrag_pg import db, defaults, queries  # noqa: E402
from hrag_pg.embedding import default_embedder  # noqa: E402
from hrag_pg.evaluation import truncator_for  # noqa: E402

DATABASES = (("pgdocs", "pgdocs.jsonl", False), ("pgdocs-small", "pgdocs.jsonl", True),
             ("pystdlib-small", "pystdlib.jsonl", True))
BUDGET = 2000


def main() -> int:
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    lines = []
    for name, question_file, small in DATABASES:
        database = f"hrag_bench_budget_{name.replace('-', '_')}"
        url = db.libpq_url(db.sqlalchemy_url(benchdb._with_database(benchdb.maintenance_url(HERE / ".data" / "pg"),
                                                                     database)))
        corpus = common.DEFAULT_CORPUS if name.startswith("pgdocs") else HERE / ".data" / "corpora" / "pystdlib"
        questions = common.read_questions(HERE / "questions" / question_file)
        questions = common.answerable(questions, common.select_files(corpus, questions, small=small))
        vectors = embedder.embed([q["question"] for q in questions])
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
            register_vector(conn)
            for mode in ("auto-merge", "parent-child"):
                k = defaults.TOP_K if mode == "auto-merge" else defaults.TOP_K_CHILDREN
                for label, candidates in (("3 × k (before 0013)", 3 * k), ("max(k, 30) (default)", None)):
                    contexts, times = [], []
                    for q, v in zip(questions, vectors, strict=True):
                        search = queries.Search(query=v, text=q["question"], collection=COLLECTION,
                                                candidates=candidates)
                        sql, params = plan(mode, search, BUDGET)
                        best = float("inf")
                        for _ in range(3):
                            started = time.perf_counter()
                            rows = conn.execute(sql, params).fetchall()
                            best = min(best, (time.perf_counter() - started) * 1000)
                        times.append(best)
                        contexts.append([r["content"] for r in rows])
                    narrow, broad, _ = recall_by_kind(questions, contexts, BUDGET, truncator)
                    lines.append(f"| {name} | {mode} | {label} | {narrow:.2f} / {broad:.2f} | "
                                 f"{statistics.median(times):.2f} |")
                    print(lines[-1], flush=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    header = [
        "# Vector candidates for the hybrid auto-merge and parent-child: 3 × k against max(k, 30)",
        "",
        f"`python bench/candidates.py` (see its docstring). Measured {now}, load average "
        f"{os.getloadavg()[0]:.1f}; hrag-pg commit: {git_revision()}",
        "",
        f"| database | mode (defaults) | vector candidates | recall @{BUDGET:,} narrow / broad | SQL p50 ms |",
        "|---|---|---|---:|---:|",
    ]
    out = HERE / "results" / "candidates.md"
    out.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
