"""Single-node A/B: the retrieval statements at head against an earlier revision's functions, same rows.

    python bench/studies/revision_ab.py --database hrag_bench_cluster_small --before 0009

Copies the (already ingested, head) database as ``<database>_<before>``,
downgrades the copy to ``--before``, then times every statement on both,
interleaved per question (alternating which goes first) so load on the
machine hits both alike, and checks that both return the same rows.  Prints
a Markdown table (p50 / p95 ms per revision) and the share of identical
results; writes nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)

import benchdb
import common

from hrag_pg.embedders import default_embedder

HITS = ("ARRAY(SELECT node_id FROM hit ORDER BY score DESC, node_id), "
        "ARRAY(SELECT score FROM hit ORDER BY score DESC, node_id)")
STATEMENTS = {
    "search_hybrid(k=30)": "SELECT * FROM hrag.search_hybrid(%(q)s, %(qt)s, 30, 'bench')",
    "search_hybrid(k=30, candidates=90)": "SELECT * FROM hrag.search_hybrid(%(q)s, %(qt)s, 30, 'bench', NULL, 0.3, 90)",
    "parent_child(20, 4)": "SELECT * FROM hrag.parent_child(%(q)s, 20, 4, 'bench')",
    "auto_merge(12, 0.5)": "SELECT * FROM hrag.auto_merge(%(q)s, 12, 0.5, 'bench')",
    "retrieve(2000)": "SELECT * FROM hrag.retrieve(%(q)s, %(qt)s, 2000, 'bench')",
    "hybrid hits -> auto_merge_hits": "WITH hit AS (SELECT node_id, score FROM hrag.search_hybrid("
        "%(q)s, %(qt)s, hrag.sample_hits(12, 'bench'), 'bench')) "
        f"SELECT * FROM hrag.auto_merge_hits({HITS}, 0.5)",
    "hybrid hits -> parent_child_hits": "WITH hit AS (SELECT node_id, score FROM hrag.search_hybrid("
        "%(q)s, %(qt)s, 60, 'bench', NULL, 0.3, 60)) "
        f"SELECT * FROM hrag.parent_child_hits({HITS}, 4, 20)",
    "hybrid hits -> retrieve_hits": "WITH hit AS (SELECT node_id, score FROM hrag.search_hybrid("
        "%(q)s, %(qt)s, 30, 'bench')) "
        f"SELECT * FROM hrag.retrieve_hits({HITS}, 2000)",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--before", required=True, help="the revision to compare head with, e.g. 0009")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()

    admin = benchdb.maintenance_url(args.data_dir)
    copy = benchdb.downgraded_copy(admin, args.database, args.before)
    # A revision may rewrite hrag.nodes (0023 does, both ways): time both databases vacuumed and analyzed.
    for name in (args.database, copy):
        with psycopg.connect(benchdb.with_database(admin, name), autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE) hrag.nodes, hrag.documents, hrag.document_terms")

    questions = common.read_questions(common.DEFAULT_QUESTIONS)
    vectors = default_embedder().embed([q["question"] for q in questions])
    conns = {"head": psycopg.connect(benchdb.with_database(admin, args.database)),
             args.before: psycopg.connect(benchdb.with_database(admin, copy))}
    for conn in conns.values():
        register_vector(conn)
    timings: dict[tuple[str, str], list[float]] = {(s, r): [] for s in STATEMENTS for r in conns}
    same_by: dict[str, int] = dict.fromkeys(STATEMENTS, 0)
    total_by: dict[str, int] = dict.fromkeys(STATEMENTS, 0)
    for p in range(args.passes + 1):  # the first pass warms the caches
        for i, (q, v) in enumerate(zip(questions, vectors, strict=True)):
            for name, sql in STATEMENTS.items():
                order = list(conns) if (i + p) % 2 else list(reversed(conns))
                rows = {}
                for revision in order:
                    started = time.perf_counter()
                    rows[revision] = conns[revision].execute(sql, {"q": v, "qt": q["question"]}).fetchall()
                    if p:
                        timings[(name, revision)].append((time.perf_counter() - started) * 1000)
                total_by[name] += 1
                same_by[name] += rows["head"] == rows[args.before]
            for conn in conns.values():
                conn.rollback()

    def stats(values: list[float]) -> tuple[float, float]:
        values = sorted(values)
        return statistics.median(values), values[int(0.95 * (len(values) - 1))]

    same, total = sum(same_by.values()), sum(total_by.values())
    print(f"{len(questions)} questions x {args.passes} passes after a warm-up; identical results: "
          f"{same}/{total}; load average {os.getloadavg()[0]:.1f}\n")
    print(f"| statement | {args.before} p50 / p95 ms | head p50 / p95 ms | p50 head ÷ {args.before} | identical rows |")
    print("|---|---:|---:|---:|---:|")
    for name in STATEMENTS:
        b50, b95 = stats(timings[(name, args.before)])
        h50, h95 = stats(timings[(name, "head")])
        print(f"| {name} | {b50:.2f} / {b95:.2f} | {h50:.2f} / {h95:.2f} | {h50 / b50:.2f}× | "
              f"{same_by[name]}/{total_by[name]} |")
    return 0 if same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
