"""Retrieval on a local Citus cluster against a single node holding the same rows, by shard count.

    python bench/cluster_latency.py [--shards 4 8 16] [--reuse]

Ingests the small pgdocs configuration (40 files, the real model) once into
``hrag_bench_cluster_small`` on the benchmark's embedded server (``--reuse``
keeps it), then starts a coordinator and two workers on this machine (the
distributed tests' cluster: tests/distributed/cluster.py, Citus built once
and cached) and copies the rows, unchanged, into

* ``single``: a plain database on the coordinator (no Citus extension): the
  single node, same binaries and settings as the cluster's nodes;
* ``hrag``: the Citus database, distributed with each shard count in turn.

Each question of the set is embedded once; the same vectors then go to every
statement (3 passes after a warm-up), one SQL statement each over a unix
socket.  Writes ``bench/results/cluster-pgdocs-small.md`` with the commit,
load average, p50/p95 per statement and configuration, how many documents a
query's hits spread over (one per-document call each), and the single
node's HNSW index bytes per leaf (the input of docs/scaling.md's estimate).
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import benchdb  # noqa: E402
import common  # noqa: E402
from run import git_revision  # noqa: E402

from hrag_pg import db, migrate  # noqa: E402
from hrag_pg.api import HRAG  # noqa: E402
from hrag_pg.embedders import default_embedder  # noqa: E402
from tests.distributed.cluster import CitusCluster, find_or_build  # noqa: E402

DATABASE = "hrag_bench_cluster_small"
COLLECTION = "bench"
TABLES = ("documents", "nodes", "document_terms")

STATEMENTS = {
    "search_leaves(k=20)": "SELECT * FROM hrag.search_leaves(%(q)s, 20, 'bench')",
    "search_hybrid(k=30)": "SELECT * FROM hrag.search_hybrid(%(q)s, %(qt)s, 30, 'bench')",
    "parent_child(20 children, 4 parents)": "SELECT * FROM hrag.parent_child(%(q)s, 20, 4, 'bench')",
    "auto_merge(top_k=12)": "SELECT * FROM hrag.auto_merge(%(q)s, 12, 0.5, 'bench')",
    "retrieve(max_tokens=2000)": "SELECT * FROM hrag.retrieve(%(q)s, %(qt)s, 2000, 'bench')",
}
#: How many documents the hits of each mode spread over (one per-document call each).
SPREAD = {
    "auto_merge(top_k=12)": "SELECT count(DISTINCT document_id) FROM hrag.search_leaves(%(q)s, 12, 'bench')",
    "retrieve(max_tokens=2000)":
        "SELECT count(DISTINCT document_id) FROM hrag.search_hybrid(%(q)s, %(qt)s, 30, 'bench')",
}


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    """The stored (not generated) columns of hrag.<table>, in order."""
    return [r[0] for r in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attgenerated = '' ORDER BY attnum", (f"hrag.{table}",))]


def copy_rows(source: str, target: str) -> None:
    """Copy documents, nodes (parents first) and statistics from one installation to another."""
    with psycopg.connect(source) as src, psycopg.connect(target) as dst:
        for table in TABLES:
            cols = ", ".join(_columns(src, table))
            order = " ORDER BY depth" if table == "nodes" else ""
            with src.cursor().copy(f"COPY (SELECT {cols} FROM hrag.{table}{order}) TO STDOUT (FORMAT binary)"
                                   ) as out, dst.cursor().copy(
                    f"COPY hrag.{table} ({cols}) FROM STDIN (FORMAT binary)") as into:
                for block in out:
                    into.write(block)
        dst.commit()


Rows = dict[tuple[str, str], list[tuple[object, ...]]]


def _comparable(row: tuple[object, ...]) -> tuple[object, ...]:
    """A result row with its scores rounded (float tolerance 1e-5), everything else as is."""
    return tuple(round(v, 5) if isinstance(v, float) else v for v in row)


def measure(url: str, questions: list[dict], vectors: np.ndarray, passes: int
            ) -> tuple[dict[str, list[float]], Rows]:
    """Timings per statement, and the rows each (statement, question) returned on the warm-up pass."""
    timings: dict[str, list[float]] = {name: [] for name in STATEMENTS}
    rows: Rows = {}
    with psycopg.connect(url) as conn:
        register_vector(conn)
        for p in range(passes + 1):
            for q, v in zip(questions, vectors, strict=True):
                for name, sql in STATEMENTS.items():
                    started = time.perf_counter()
                    result = conn.execute(sql, {"q": v, "qt": q["question"]}).fetchall()
                    if p:  # the first pass warms the caches
                        timings[name].append((time.perf_counter() - started) * 1000)
                    else:
                        rows[(name, q["id"])] = [_comparable(tuple(r)) for r in result]
                conn.rollback()
    return timings, rows


def differences(single: Rows, cluster: Rows) -> dict[str, list[str]]:
    """Per statement, the questions whose rows (ids, order, scores within 1e-5, texts) differ."""
    out: dict[str, list[str]] = {name: [] for name in STATEMENTS}
    for (name, qid), expected in single.items():
        if cluster[(name, qid)] != expected:
            out[name].append(qid)
    return out


def spread(url: str, questions: list[dict], vectors: np.ndarray) -> dict[str, float]:
    with psycopg.connect(url) as conn:
        register_vector(conn)
        return {name: statistics.mean(conn.execute(sql, {"q": v, "qt": q["question"]}).fetchone()[0]
                                      for q, v in zip(questions, vectors, strict=True))
                for name, sql in SPREAD.items()}


def p50_p95(values: list[float]) -> str:
    values = sorted(values)
    return f"{statistics.median(values):.1f} / {values[int(0.95 * (len(values) - 1))]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shards", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="keep an already ingested source database")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data" / "pg")
    parser.add_argument("--source-url", help="copy the rows of this installation instead (collection 'bench')")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "cluster-pgdocs-small.md")
    args = parser.parse_args()
    revision = git_revision()

    questions = common.read_questions(common.DEFAULT_QUESTIONS)
    files = common.select_files(common.DEFAULT_CORPUS, questions, small=True)
    if args.source_url:
        source_url = args.source_url
    elif args.reuse:
        source_url = db.sqlalchemy_url(benchdb.database_url(args.data_dir, DATABASE))
        migrate.upgrade(source_url)
    else:
        source_url = benchdb.fresh_database(args.data_dir, DATABASE)
        started = time.perf_counter()
        report = HRAG(source_url).ingest(files, collection=COLLECTION, bulk=True)
        print(f"ingested {len(report.results)} files ({report.nodes} nodes) in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    source = db.libpq_url(source_url)
    vectors = default_embedder().embed([q["question"] for q in questions])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = CitusCluster(find_or_build(), workers=2)
    cluster.start()
    try:
        admin = cluster.coordinator.url(cluster.socket_dir, "postgres")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE single")
        single = cluster.url(driver=False, database="single")
        migrate.upgrade(cluster.url(database="single"))
        copy_rows(source, single)
        with psycopg.connect(single) as conn:
            leaves, index_bytes, table_bytes = conn.execute(
                "SELECT (SELECT count(*) FROM hrag.nodes WHERE embedding IS NOT NULL), "
                "pg_relation_size('hrag.nodes_embedding_hnsw_idx'), pg_total_relation_size('hrag.nodes')"
            ).fetchone()  # type: ignore[misc]
            documents = conn.execute("SELECT count(*) FROM hrag.documents").fetchone()[0]  # type: ignore[index]
        single_timings, single_rows = measure(single, questions, vectors, args.passes)
        results = {"single node": single_timings}
        differ: dict[str, dict[str, list[str]]] = {}
        spreads = spread(single, questions, vectors)
        print("single node done", flush=True)

        coordinator = cluster.url(driver=False)
        for shards in args.shards:
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute("DROP SCHEMA IF EXISTS hrag CASCADE")
            migrate.upgrade(cluster.url())
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute("SELECT * FROM hrag.distribute(%s)", (shards,))
            copy_rows(source, coordinator)
            with psycopg.connect(coordinator, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE hrag.nodes")
            name = f"Citus, 2 workers, {shards} shards"
            results[name], cluster_rows = measure(coordinator, questions, vectors, args.passes)
            differ[name] = differences(single_rows, cluster_rows)
            print(f"{shards} shards done", flush=True)
    finally:
        cluster.stop()

    load = os.getloadavg()[0]
    names = list(results)
    lines = [
        "# Retrieval on a local Citus cluster vs a single node: pgdocs-small", "",
        f"Corpus: {len(files)} files from `pgdocs` ({documents} documents, {leaves:,} search targets); "
        f"{len(questions)} questions × {args.passes} passes after a warm-up, one SQL statement each over a "
        "unix socket. Every server runs on this one 2-core machine (coordinator, 2 workers; the single node "
        "is a plain database on the coordinator's server: same binaries, same settings), so the cluster "
        "columns measure the distribution overhead, not added capacity.",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
        f"{load:.1f}. hrag-pg commit: {revision}.", "",
        "p50 / p95 ms:", "",
        "| statement | " + " | ".join(names) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for statement in STATEMENTS:
        lines.append(f"| {statement} | " + " | ".join(p50_p95(results[n][statement]) for n in names) + " |")
    lines += ["", "Same results as the single node (rows, order, scores within 1e-5, texts), questions of "
              f"{len(questions)}:", "",
              "| statement | " + " | ".join(names[1:]) + " |", "|---|" + "---:|" * (len(names) - 1)]
    for statement in STATEMENTS:
        lines.append(f"| {statement} | " + " | ".join(
            f"{len(questions) - len(differ[n][statement])}"
            + (f" (differ: {', '.join(differ[n][statement][:5])})" if differ[n][statement] else "")
            for n in names[1:]) + " |")
    lines += [
        "",
        "Documents the hits spread over (mean; one delegated per-document call each): "
        + ", ".join(f"{name}: {value:.1f}" for name, value in spreads.items()) + ".",
        f"Single node: HNSW index {index_bytes / 2**20:.1f} MiB for {leaves:,} leaves = "
        f"{index_bytes / leaves:,.0f} bytes per leaf; hrag.nodes with its indexes {table_bytes / 2**20:.1f} MiB "
        f"= {table_bytes / leaves:,.0f} bytes per leaf.",
    ]
    out = args.out
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
