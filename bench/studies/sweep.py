"""Sweep hrag-pg's retrieval settings on a corpus already ingested by bench/run.py.

    python bench/studies/sweep.py --name small            # after `python bench/run.py --small`
    python bench/studies/sweep.py --name full --mode auto-merge

Reuses the database ``hrag_bench_<name>`` and the question subset that
run.py wrote to bench/.data, evaluates a grid of settings end to end and
writes bench/studies/results/sweep-<name>.md: recall per question kind at the 2,000
and 4,000 token budgets, whole-context recall, mean tokens and latency.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from hrag_pg import HRAG
from hrag_pg.evaluation import evaluate, load_questions

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)
import benchdb
import common

HERE = Path(__file__).resolve().parent

COLLECTION = "bench"

GRIDS: dict[str, dict[str, list[Any]]] = {
    "auto-merge": {
        "top_k": [12, 20, 30],
        "merge_threshold": [0.5, 0.3, 0.2],
        "lexical_weight": [0.0, 0.3, 0.5],
        "min_relative_score": [None, 0.8],
    },
    "parent-child": {
        "top_k_children": [20],
        "max_parents": [2, 3, 4],
        "lexical_weight": [0.0, 0.3, 0.5],
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="small")
    parser.add_argument("--mode", choices=sorted(GRIDS), action="append")
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    questions = load_questions(args.data_dir / f"{args.name}-questions.jsonl")
    admin = benchdb.maintenance_url(args.data_dir / "pg")
    url = benchdb.db.sqlalchemy_url(benchdb.with_database(admin, f"hrag_bench_{args.name}"))
    hrag = HRAG.open(url)  # migrates a database left by an older hrag-pg
    rows = []
    for mode in args.mode or sorted(GRIDS):
        grid = GRIDS[mode]
        for values in itertools.product(*grid.values()):
            settings = dict(zip(grid.keys(), values, strict=True))
            rep = evaluate(hrag, questions, mode=mode, collection=COLLECTION, **settings)
            n, b, a = rep.summary("narrow"), rep.summary("broad"), rep.summary("all")
            row = {"mode": mode, **settings,
                   "narrow@2000": n.budget_recall[2000], "broad@2000": b.budget_recall[2000],
                   "narrow@4000": n.budget_recall[4000], "broad@4000": b.budget_recall[4000],
                   "narrow": n.recall, "broad": b.recall, "tokens": a.mean_tokens, "p50_ms": a.latency_p50_ms}
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"sweep-{args.name}.md").write_text(markdown(args.name, rows, len(questions)), encoding="utf-8")
    print(markdown(args.name, rows, len(questions)))
    return 0


def markdown(name: str, rows: list[dict[str, Any]], questions: int) -> str:
    out = [f"# Settings sweep ({name}, {questions} questions)", "",
           ("End-to-end `retriever.context(question)` per setting; recall at budgets cut in the retriever's "
           "own order (see run.py). Sorted by broad recall at 2,000 tokens within each mode."), ""]
    for mode in dict.fromkeys(r["mode"] for r in rows):
        chosen = sorted((r for r in rows if r["mode"] == mode), key=lambda r: (-r["broad@2000"], -r["narrow@2000"]))
        keys = list(GRIDS[mode])
        out += [f"## {mode}", "", "| " + " | ".join(keys) + " | narrow @2k | broad @2k | narrow @4k | broad @4k "
                "| narrow | broad | tokens | p50 ms |", "|" + "---:|" * (len(keys) + 8)]
        for r in chosen:
            out.append("| " + " | ".join(str(r[k]) for k in keys) + " | " + " | ".join(
                f"{r[k]:.2f}" for k in ("narrow@2000", "broad@2000", "narrow@4000", "broad@4000", "narrow", "broad"))
                + f" | {r['tokens']:,.0f} | {r['p50_ms']:.1f} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
