"""Reads without the pool's ping against reads with it: the retriever path, interleaved.

    python bench/studies/ping_ab.py                 # on hrag_bench_full (bench/run.py --full ingests it)
    python bench/studies/ping_ab.py --database hrag_bench_budget_pystdlib --questions bench/questions/pystdlib.jsonl

Every question is asked through the auto-merge and the budget-mode retrievers
(their defaults, the flow ``run.py`` times, question embedded beforehand),
once through ``Repository._fetch`` (since 71723e2: no ping, a dead connection
repeated) and once through a pinged checkout (what every read did before),
alternating which goes first, so the machine's speed at the time weighs on
both alike.  p50 over the passes after a warm-up.  Writes
``bench/studies/results/ping-ab-<database>.md`` with the commit, date and load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import benchdb
import common
from budget import measured

from hrag_pg.api import HRAG
from hrag_pg.embedders import default_embedder
from hrag_pg.retrievers import run as run_flow
from hrag_pg.settings import AutoMergeSettings, BudgetSettings

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="hrag_bench_full")
    parser.add_argument("--collection", default="bench")
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()

    url = benchdb.database_url(args.data_dir, args.database)
    embedder = default_embedder()
    hrag = HRAG(url, embedder=embedder)
    questions = common.read_questions(args.questions)
    vectors = embedder.embed([q["question"] for q in questions])
    repo = hrag.repository

    def pinged(sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        return repo._fetch_once(sql, params, ping=True)

    ways = {"unpinged (HEAD)": repo.fetch, "pinged (before)": pinged}
    lines = []
    for label, retriever in (("auto-merge (defaults)", hrag.retriever(AutoMergeSettings(collection=args.collection))),
                             ("auto, 2,000 tokens (defaults)",
                              hrag.retriever(BudgetSettings(collection=args.collection)))):
        timings: dict[str, list[float]] = {way: [] for way in ways}
        same = 0
        for p in range(args.passes + 1):  # the first pass warms the caches
            for i, (q, v) in enumerate(zip(questions, vectors, strict=True)):
                order = list(ways) if (i + p) % 2 else list(reversed(ways))
                got = {}
                for way in order:
                    started = time.perf_counter()
                    got[way] = run_flow(retriever.results_flow(q["question"], v), ways[way])
                    if p:
                        timings[way].append((time.perf_counter() - started) * 1000)
                same += got["unpinged (HEAD)"] == got["pinged (before)"]
        new, old = (statistics.median(timings[w]) for w in ways)
        lines.append(f"| {label} | {old:.2f} | {new:.2f} | {new / old:.2f}× | "
                     f"{same}/{len(questions) * (args.passes + 1)} |")
        print(lines[-1], flush=True)
    out = HERE / "results" / f"ping-ab-{args.database}.md"
    common.write_results(out, [
        "# Reads without the pool's ping against reads with it",
        "",
        f"Database `{args.database}`, {len(questions)} questions × {args.passes} passes after a warm-up, "
        "interleaved; the retriever path's p50 (ms), question embedded beforehand.",
        measured("studies/ping_ab.py"),
        "",
        "| retriever | pinged (before) p50 ms | unpinged (HEAD) p50 ms | HEAD ÷ before | identical results |",
        "|---|---:|---:|---:|---:|",
        *lines,
    ])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
