"""Recall A/B: every mode's recall at head against an earlier revision, exact vector search on both.

    python bench/studies/recall_ab.py --database hrag_bench_budget_nodejs --name nodejs --before 0022

Copies the (already ingested, head) database as ``<database>_<before>`` and
downgrades the copy, as ``revision_ab.py`` does, then asks every question of
``bench/questions/<name>.jsonl`` in every mode on both with the defaults the
Python layer uses, and scores recall as ``budget.py`` does.  Both sessions
run with ``enable_indexscan = off``, so the vector stage is an exact search:
a revision that rewrites ``hrag.nodes`` builds the HNSW index again, and two
builds of one approximate index are two different graphs, which would blur
what the revision itself changes.  Writes
``bench/studies/results/recall-ab-<before>-<name>.md`` with each question whose
recall moved.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import benchdb
import budget
import common
from run import git_revision

from hrag_pg import defaults
from hrag_pg.embedders import default_embedder
from hrag_pg.evaluation import truncator_for

HERE = Path(__file__).resolve().parent

MODES = (("auto", True), ("auto-merge", False), ("parent-child", False))  # (mode, chooses within the budget)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--name", required=True, help="the corpus: pgdocs, or one under bench/.data/corpora")
    parser.add_argument("--before", required=True, help="the revision to compare head with, e.g. 0022")
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()
    revision = git_revision()

    admin = benchdb.maintenance_url(args.data_dir)
    copy = benchdb.downgraded_copy(admin, args.database, args.before)

    corpus = common.DEFAULT_CORPUS if args.name == "pgdocs" else common.DATA_DIR / "corpora" / args.name
    questions = common.read_questions(common.QUESTIONS_DIR / f"{args.name}.jsonl")
    questions = common.answerable(questions, common.select_files(corpus, questions, small=False))
    embedder = default_embedder()
    truncator = truncator_for(embedder)
    vectors = list(embedder.embed([q["question"] for q in questions]))
    conns = {}
    for label, database in ((args.before, copy), ("head", args.database)):
        conn = psycopg.connect(benchdb.with_database(admin, database), row_factory=dict_row, autocommit=True)
        register_vector(conn)
        conn.execute("SET enable_indexscan = off")  # the vector stage exact on both (see the docstring)
        conns[label] = conn

    def mean(values: list[float], kind: str) -> float:
        return statistics.mean(v for v, q in zip(values, questions, strict=True) if q["kind"] == kind)

    rows, moved = [], []
    for mode, chooses in MODES:
        # a mode that does not choose within the budget is asked once and cut at each budget
        for asked_at in (budget.BUDGETS if chooses else (defaults.MAX_TOKENS,)):
            contexts = {label: budget.ask_all(conn, questions, vectors, mode, asked_at)[0]
                        for label, conn in conns.items()}
            for cut in ((asked_at,) if chooses else budget.BUDGETS):
                recall = {label: [r for r, _ in budget.question_recalls(questions, found, cut, truncator)]
                          for label, found in contexts.items()}
                before, head = recall[args.before], recall["head"]
                rows.append(f"| {mode} | {cut:,} | {mean(before, 'narrow'):.2f} → {mean(head, 'narrow'):.2f} | "
                            f"{mean(before, 'broad'):.2f} → {mean(head, 'broad'):.2f} |")
                moved += [f"- {mode} @ {cut:,}: {q['id']} ({q['kind']}) {b:.2f} → {h:.2f}: {q['question']}"
                          for q, b, h in zip(questions, before, head, strict=True) if b != h]
                print(rows[-1], flush=True)

    lines = [f"# Recall A/B, revision {args.before} against head: {args.name}", "",
             f"`python bench/studies/recall_ab.py --database {args.database} --name {args.name} "
             f"--before {args.before}` "
             f"(see its docstring): {len(questions)} questions, every mode with the Python layer's defaults, "
             "the vector stage an exact search on both databases.", "",
             f"hrag-pg commit: {revision}", "",
             f"| mode | budget | narrow recall {args.before} → head | broad recall {args.before} → head |",
             "|---|---:|---:|---:|", *rows, "",
             "Questions whose recall moved:" if moved else "No question's recall moved.", *moved]
    out = HERE / "results" / f"recall-ab-{args.before}-{args.name}.md"
    common.write_results(out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
