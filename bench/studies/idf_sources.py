"""Two ways to get the lexical channel's document frequencies, measured on one database.

    python bench/studies/idf_sources.py --name pgdocs      # after bench/budget.py has ingested it

The candidate stage weights query terms by BM25 IDF, which needs each term's
document frequency (how many search targets of the collection contain it):

* **maintained** (what hrag-pg does): ``hrag.document_terms`` holds per
  document and term the number of search targets containing it, rewritten
  by the writer in the document's own transaction; a query sums a few index
  rows per term (``hrag._term_weights``).
* **counted**: count the matching search targets through the GIN index on
  ``nodes.lexical_hashes`` at query time (``count(*) WHERE lexical_hashes @>
  ARRAY[term_hash(term)]``; before revision 0020 the same on
  ``lexical_terms``): nothing to maintain, but the cost grows with the term's
  frequency.

For every question of the set, both are computed for the question's terms
(the same ``hrag.lexical_terms``), checked to agree, and timed (p50/p95/max
over the questions, warm, 5 passes).  Writes
``bench/studies/results/idf-sources-<name>.md`` with the commit and load it ran at.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import benchdb
import common

from hrag_pg import db

HERE = Path(__file__).resolve().parent

COLLECTION = "bench"
PASSES = 5

MAINTAINED = "SELECT term, df FROM hrag._term_weights(hrag.lexical_terms(%(q)s), %(c)s)"
COUNTED = """
SELECT q.term, (SELECT count(*) FROM hrag.nodes n
                 WHERE n.lexical_hashes @> ARRAY[hrag.term_hash(q.term)]
                   AND n.embedding IS NOT NULL
                   AND n.collection = %(c)s) AS df
  FROM unnest(hrag.lexical_terms(%(q)s)) AS q(term)
"""


def timed(conn: psycopg.Connection, sql: str, question: str) -> tuple[float, dict[str, int]]:
    started = time.perf_counter()
    rows = conn.execute(sql, {"q": question, "c": COLLECTION}).fetchall()
    return (time.perf_counter() - started) * 1000, {term: int(df) for term, df in rows if df}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="pgdocs", help="the budget database's name (bench/budget.py --name)")
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()
    dbname = f"hrag_bench_budget_{args.name.replace('-', '_')}"
    url = db.sqlalchemy_url(benchdb.database_url(args.data_dir, dbname))
    questions = [q["question"] for q in common.read_questions(args.questions)]
    conn = psycopg.connect(db.libpq_url(url), autocommit=True)
    leaves = conn.execute("SELECT count(*) FROM hrag.nodes WHERE embedding IS NOT NULL AND collection = %s",
                          (COLLECTION,)).fetchone()[0]

    times: dict[str, list[float]] = {"maintained": [], "counted": []}
    per_question: dict[str, list[float]] = {"maintained": [], "counted": []}
    disagreements = 0
    for question in questions:  # warm both paths once, and check they agree
        _, a = timed(conn, MAINTAINED, question)
        _, b = timed(conn, COUNTED, question)
        disagreements += a != b
    for _ in range(PASSES):
        for question in questions:
            for key, sql in (("maintained", MAINTAINED), ("counted", COUNTED)):
                ms, _ = timed(conn, sql, question)
                times[key].append(ms)
    for key in times:
        for i in range(len(questions)):
            per_question[key].append(statistics.median(times[key][i::len(questions)]))

    def pct(values: list[float], p: float) -> float:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]

    load = os.getloadavg()[0]
    lines = [
        f"# Document frequencies for the lexical channel: maintained vs counted ({args.name})",
        "",
        f"{len(questions)} questions from `{args.questions.name}` over {leaves:,} search targets; each "
        f"question's terms (`hrag.lexical_terms`) looked up both ways, {PASSES} warm passes, the median per "
        "question, then p50 / p95 / max over the questions. Only the document-frequency lookup is timed "
        "(the rest of the candidate stage is the same).",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load:.1f} "
        "(2 cores).",
        f"hrag-pg commit: {common.git_revision()}",
        "",
        "| document frequencies | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
    ]
    labels = {"maintained": "maintained (`hrag.document_terms`, written with the rows)",
              "counted": "counted through the GIN index at query time"}
    for key, values in per_question.items():
        lines.append(f"| {labels[key]} | {pct(values, 50):.2f} | {pct(values, 95):.2f} | {max(values):.2f} |")
    lines += ["", f"The two agree on every term's frequency for {len(questions) - disagreements} of "
              f"{len(questions)} questions."]
    out = HERE / "results" / f"idf-sources-{args.name}.md"
    common.write_results(out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
