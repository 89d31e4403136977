"""ANN recall and latency against hnsw.ef_search, on a database left by sql_latency.py.

    python bench/studies/ef_search.py --leaves 1000000 --ef 40 80 160 320

Queries come from the stored tree itself: half are a section's mean
embedding (broad), half one leaf's embedding plus noise (narrow).  For each
ef_search (``hnsw.ef_search`` and ``hrag.ef_search`` both set to it, so the
floor of revision 0019 does not raise it), reports recall@12 of ``hrag.search_leaves`` against an exact scan
and the p50/p95 latency of ``hrag.search_leaves(q, 12)`` and
``hrag.auto_merge(q, 12, 0.5)``.  Writes bench/studies/results/ef-search-<leaves>.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from hrag_pg import db
from hrag_pg.evaluation import percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool (common, benchdb, budget, run)
import benchdb
import common

HERE = Path(__file__).resolve().parent

EXACT = ("SELECT id FROM hrag.nodes WHERE embedding IS NOT NULL "
         "ORDER BY (embedding <=> %s) + 0, id LIMIT %s")


def queries(conn: psycopg.Connection, count: int, rng: np.random.Generator) -> list[np.ndarray]:
    sections = conn.execute(
        "SELECT avg(c.embedding) FROM hrag.nodes c WHERE c.parent_id IN "
        "(SELECT id FROM hrag.nodes WHERE kind = 'section' ORDER BY random() LIMIT %s) "
        "AND c.embedding IS NOT NULL GROUP BY c.parent_id", (count // 2,)).fetchall()
    leaves = conn.execute("SELECT embedding FROM hrag.nodes TABLESAMPLE SYSTEM (1) "
                          "WHERE embedding IS NOT NULL LIMIT %s", (count - count // 2,)).fetchall()
    out = []
    for (v,) in sections:
        out.append(np.asarray(v.to_numpy(), dtype=np.float32))
    for (v,) in leaves:
        noisy = np.asarray(v.to_numpy(), dtype=np.float32) + 0.3 * rng.standard_normal(384).astype(np.float32) / 19.6
        out.append(noisy)
    return [q / np.linalg.norm(q) for q in out]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--ef", type=int, nargs="+", default=[40, 80, 160, 320])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args(argv)
    admin = benchdb.maintenance_url(args.data_dir)
    url = db.libpq_url(benchdb.with_database(admin, f"hrag_bench_scale_{args.leaves}"))
    rng = np.random.default_rng(1)
    rows = []
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        qs = queries(conn, args.queries, rng)
        exact = [{r[0] for r in conn.execute(EXACT, (q, 12)).fetchall()} for q in qs]
        for ef in args.ef:
            # since revision 0019 the functions search max(hnsw.ef_search, k, hrag.ef_search) deep: set both
            conn.execute(f"SET hnsw.ef_search = {int(ef)}")
            conn.execute(f"SET hrag.ef_search = {int(ef)}")
            for q in qs[:10]:
                conn.execute("SELECT * FROM hrag.auto_merge(%s, 12, 0.5)", (q,)).fetchall()
            search, merge, recall = [], [], []
            for q, truth in zip(qs, exact, strict=True):
                conn.execute("SELECT * FROM hrag.search_leaves(%s, 20)", (q,)).fetchall()  # warm, untimed
                t0 = time.perf_counter()
                got = {r[0] for r in conn.execute("SELECT node_id FROM hrag.search_leaves(%s, 12)", (q,))}
                search.append((time.perf_counter() - t0) * 1000)
                recall.append(len(got & truth) / 12)
                t0 = time.perf_counter()
                conn.execute("SELECT * FROM hrag.auto_merge(%s, 12, 0.5)", (q,)).fetchall()
                merge.append((time.perf_counter() - t0) * 1000)
            rows.append((ef, float(np.mean(recall)), percentile(search, 50), percentile(search, 95),
                         percentile(merge, 50), percentile(merge, 95)))
            print(rows[-1], file=sys.stderr, flush=True)
    text = "\n".join([
        f"# ANN recall and latency by hnsw.ef_search ({args.leaves:,} synthetic leaves)", "",
        (f"{len(qs)} queries (half section means, half noisy leaves) taken from the stored tree; exact top-12 by "
        "a sequential scan. Latency of one warm SQL call (an untimed search first) over a local socket."), "",
        f"hrag-pg commit: {common.git_revision()}", "",
        "| ef_search | recall@12 | search_leaves(12) p50 / p95 ms | auto_merge(12, 0.5) p50 / p95 ms |",
        "|---:|---:|---:|---:|",
        *(f"| {ef} | {r:.3f} | {s50:.2f} / {s95:.2f} | {m50:.2f} / {m95:.2f} |" for ef, r, s50, s95, m50, m95 in rows),
        ""])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"ef-search-{args.leaves}.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
