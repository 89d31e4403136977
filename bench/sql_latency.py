"""Scale benchmark of the SQL retrieval functions on synthetic trees.

    python bench/sql_latency.py                 # 10k and 100k leaves
    python bench/sql_latency.py --full          # 10k, 100k and 1M leaves
    python bench/sql_latency.py --sizes 20000   # any sizes

Each size gets a fresh database on the benchmark's embedded server
(bench/.data; or HRAG_BENCH_DATABASE_URL).  Documents are synthetic trees
(document > 10 chapters > 10 sections > 10 leaves, so 1,000 leaves per
document) with random unit vectors (D=384) that are *clustered* like real
text: a leaf is the normalised sum of its document's, chapter's and
section's random directions plus its own noise (squared weights
0.2/0.2/0.25/0.35, so leaves of one section have cosine ~0.65, of one
chapter ~0.4, of one document ~0.2).  Queries are half "broad" (near a
section's centre) and half "narrow" (near one leaf).

Reported per size: build time the bulk way (drop the HNSW index, COPY every
document through ``Repository.write_rows_only``, CREATE INDEX) and the write
throughput with the index maintained (extra documents inserted into the
indexed table); table and index size; p50/p95 latency of
``hrag.search_leaves`` (k=20 and k=12), ``hrag.parent_child`` (20 children,
4 parents) and ``hrag.auto_merge`` (top 12, threshold 0.5), each called as
one SQL statement with a vector parameter, and their ratios to
search_leaves; ANN recall@k of search_leaves against exact search.
Results: bench/results/scale-<name>.md and .json (plot: bench/plots.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg
import sqlalchemy as sa
from pgvector.psycopg import register_vector

from hrag_pg import db
from hrag_pg.evaluation import percentile
from hrag_pg.ingest.flatten import FlatDocument, flatten
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.repository import Repository

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchdb
import common

DIM = 384
CHAPTERS, SECTIONS, LEAVES = 10, 10, 10
LEAVES_PER_DOC = CHAPTERS * SECTIONS * LEAVES
WEIGHTS = np.sqrt(np.array([0.2, 0.2, 0.25, 0.35], dtype=np.float32))
HNSW_INDEX = "nodes_embedding_hnsw_idx"
HNSW_DDL = (f"CREATE INDEX {HNSW_INDEX} ON hrag.nodes USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)")
BUILD_MEMORY = "4GB"  # maintenance_work_mem for CREATE INDEX (the graph must fit for a fast build)
MAINTAINED_DOCS = 5  # documents (5,555 nodes) inserted with the index in place

FUNCTIONS = {
    "search_leaves(k=20)": "SELECT * FROM hrag.search_leaves(%s, 20)",
    "search_leaves(k=12)": "SELECT * FROM hrag.search_leaves(%s, 12)",
    "parent_child(20, 4)": "SELECT * FROM hrag.parent_child(%s, 20, 4)",
    "auto_merge(12, 0.5)": "SELECT * FROM hrag.auto_merge(%s, 12, 0.5)",
}
EXACT = ("SELECT id FROM hrag.nodes WHERE embedding IS NOT NULL "
         "ORDER BY (embedding <=> %s) + 0, id LIMIT %s")  # not index-orderable: an exact scan


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


@dataclass
class SyntheticDoc:
    flat: FlatDocument
    vectors: dict[str, np.ndarray]
    doc_dir: np.ndarray
    chapter_dirs: np.ndarray  # (CHAPTERS, DIM)
    section_dirs: np.ndarray  # (CHAPTERS, SECTIONS, DIM)
    leaf_vectors: np.ndarray  # (CHAPTERS, SECTIONS, LEAVES, DIM)


def synthetic_doc(index: int, rng: np.random.Generator, collection: str = "synthetic") -> SyntheticDoc:
    doc_dir = rng.standard_normal(DIM, dtype=np.float32)
    chapter_dirs = rng.standard_normal((CHAPTERS, DIM), dtype=np.float32)
    section_dirs = rng.standard_normal((CHAPTERS, SECTIONS, DIM), dtype=np.float32)
    noise = rng.standard_normal((CHAPTERS, SECTIONS, LEAVES, DIM), dtype=np.float32)
    raw = (WEIGHTS[0] * doc_dir + WEIGHTS[1] * chapter_dirs[:, None, None, :]
           + WEIGHTS[2] * section_dirs[:, :, None, :] + WEIGHTS[3] * noise) / np.sqrt(DIM)
    leaves = unit(raw)
    root = DraftNode(kind="document", content=f"Document {index}", title=f"Document {index}")
    for c in range(CHAPTERS):
        chapter = DraftNode(kind="chapter", content=f"Chapter {index}.{c}", title=f"Chapter {index}.{c}",
                            key=f"c{c}")
        root.children.append(chapter)
        for s in range(SECTIONS):
            section = DraftNode(kind="section", content=f"Section {index}.{c}.{s}",
                                title=f"Section {index}.{c}.{s}", key=f"s{s}")
            chapter.children.append(section)
            for leaf in range(LEAVES):
                section.children.append(DraftNode(kind="paragraph", content=f"leaf {index}.{c}.{s}.{leaf}",
                                                  key=f"p{leaf}"))
    flat = flatten(DocumentTree(source=f"synthetic-{index:06d}", root=root, title=root.title),
                   collection=collection)
    targets = flat.search_targets  # pre-order: chapter-major, then section, then leaf
    vectors = {n.embed_text: v for n, v in zip(targets, leaves.reshape(-1, DIM), strict=True)}  # type: ignore[misc]
    return SyntheticDoc(flat, vectors, doc_dir, chapter_dirs, section_dirs, leaves)


def make_queries(docs: list[SyntheticDoc], count: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Half broad (a section's centre), half narrow (one leaf), each with fresh noise."""
    queries = []
    for i in range(count):
        d = docs[rng.integers(len(docs))]
        c, s = rng.integers(CHAPTERS), rng.integers(SECTIONS)
        if i % 2 == 0:
            centre = (WEIGHTS[0] * d.doc_dir + WEIGHTS[1] * d.chapter_dirs[c] + WEIGHTS[2] * d.section_dirs[c, s]) \
                / np.sqrt(DIM)
            q = unit(centre)[None][0] + 0.3 * unit(rng.standard_normal(DIM, dtype=np.float32))
        else:
            q = d.leaf_vectors[c, s, rng.integers(LEAVES)] + 0.3 * unit(rng.standard_normal(DIM, dtype=np.float32))
        queries.append(unit(q))
    return queries


def _connect(url: str) -> psycopg.Connection:
    conn = psycopg.connect(db.libpq_url(url), autocommit=True)
    register_vector(conn)
    return conn


def run_size(leaves: int, *, queries: int, recall_queries: int, data_dir: Path, seed: int = 0,
             log=print) -> dict:
    docs_needed = max(1, leaves // LEAVES_PER_DOC)
    name = f"hrag_bench_scale_{docs_needed * LEAVES_PER_DOC}"
    url = benchdb.fresh_database(data_dir, name)
    repo = Repository(db.engine(url))
    rng = np.random.default_rng(seed)
    result: dict = {"leaves": docs_needed * LEAVES_PER_DOC, "documents": docs_needed}

    # ---- bulk build: drop the HNSW index, COPY, CREATE INDEX
    with _connect(url) as conn:
        conn.execute(f"DROP INDEX hrag.{HNSW_INDEX}")
    sample: list[SyntheticDoc] = []
    nodes = 0
    generate_s = write_s = 0.0
    for i in range(docs_needed):
        t0 = time.perf_counter()
        doc = synthetic_doc(i, rng)
        generate_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        repo.write_rows_only(doc.flat, doc.vectors)
        write_s += time.perf_counter() - t0
        nodes += len(doc.flat.nodes)
        if len(sample) < 64:
            sample.append(doc)
        elif rng.random() < 64 / (i + 1):  # reservoir: queries come from any document
            sample[rng.integers(64)] = doc
        if (i + 1) % 50 == 0:
            log(f"  {i + 1}/{docs_needed} documents written ({write_s:.0f} s)")
    with _connect(url) as conn:
        conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")
        t0 = time.perf_counter()
        conn.execute(HNSW_DDL)
        index_s = time.perf_counter() - t0
        conn.execute("VACUUM ANALYZE hrag.nodes")
        sizes = conn.execute(
            "SELECT pg_relation_size(%s::regclass), pg_total_relation_size('hrag.nodes'::regclass)",
            (f"hrag.{HNSW_INDEX}",)).fetchone()
    result.update(nodes=nodes, generate_seconds=generate_s, bulk_write_seconds=write_s,
                  index_build_seconds=index_s, bulk_nodes_per_second=nodes / (write_s + index_s),
                  copy_nodes_per_second=nodes / write_s, index_bytes=int(sizes[0]), table_bytes=int(sizes[1]),
                  build_maintenance_work_mem=BUILD_MEMORY)
    log(f"  bulk: {nodes:,} nodes written in {write_s:.1f} s, HNSW built in {index_s:.1f} s")

    # ---- latency of the SQL functions (interleaved per query, after a warm-up)
    qs = make_queries(sample, queries, rng)
    timings: dict[str, list[float]] = {f: [] for f in FUNCTIONS}
    rows_out: dict[str, list[int]] = {f: [] for f in FUNCTIONS}
    ann: dict[int, list[list]] = {20: [], 12: []}
    with _connect(url) as conn:
        for q in qs[: min(20, len(qs))]:
            for sql in FUNCTIONS.values():
                conn.execute(sql, (q,)).fetchall()
        order = list(FUNCTIONS.items())
        for q in qs:
            # every function is timed warm: the first touch of a query's graph region (shared buffers are
            # smaller than the index at 1M leaves) goes to an untimed call, and the order is shuffled
            conn.execute(FUNCTIONS["search_leaves(k=20)"], (q,)).fetchall()
            rng.shuffle(order)
            for label, sql in order:
                t0 = time.perf_counter()
                rows = conn.execute(sql, (q,)).fetchall()
                timings[label].append((time.perf_counter() - t0) * 1000)
                rows_out[label].append(len(rows))
                if label.startswith("search_leaves"):
                    ann[20 if "20" in label else 12].append([r[0] for r in rows])
        # ---- ANN recall@k against an exact scan
        recall: dict[int, float] = {}
        for k in (20, 12):
            hits = []
            for q, approx in zip(qs[:recall_queries], ann[k][:recall_queries], strict=True):
                exact = {r[0] for r in conn.execute(EXACT, (q, k)).fetchall()}
                hits.append(len(exact & set(approx)) / k)
            recall[k] = float(np.mean(hits))
    result["latency_ms"] = {label: {"p50": percentile(v, 50), "p95": percentile(v, 95), "mean": float(np.mean(v))}
                            for label, v in timings.items()}
    result["mean_rows"] = {label: float(np.mean(v)) for label, v in rows_out.items()}
    result["ann_recall"] = {str(k): v for k, v in recall.items()}
    result["recall_queries"] = min(recall_queries, len(qs))
    result["queries"] = len(qs)
    base20 = result["latency_ms"]["search_leaves(k=20)"]
    base12 = result["latency_ms"]["search_leaves(k=12)"]
    result["ratios"] = {
        "parent_child/search_leaves(k=20)": {p: result["latency_ms"]["parent_child(20, 4)"][p] / base20[p]
                                              for p in ("p50", "p95")},
        "auto_merge/search_leaves(k=12)": {p: result["latency_ms"]["auto_merge(12, 0.5)"][p] / base12[p]
                                            for p in ("p50", "p95")},
    }
    log("  latency p50/p95 ms: " + ", ".join(f"{k} {v['p50']:.2f}/{v['p95']:.2f}"
                                             for k, v in result["latency_ms"].items()))

    # ---- writes with the HNSW index maintained (extra documents, then removed)
    extra = [synthetic_doc(10_000_000 + i, rng) for i in range(MAINTAINED_DOCS)]
    extra_nodes = sum(len(doc.flat.nodes) for doc in extra)
    t0 = time.perf_counter()
    for doc in extra:
        repo.write_rows_only(doc.flat, doc.vectors)
    maintained_s = time.perf_counter() - t0
    with repo.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM hrag.documents WHERE source LIKE 'synthetic-1000%'"))
    result.update(maintained_nodes=extra_nodes, maintained_seconds=maintained_s,
                  maintained_nodes_per_second=extra_nodes / maintained_s)
    log(f"  index maintained: {extra_nodes:,} nodes in {maintained_s:.1f} s "
        f"({extra_nodes / maintained_s:,.0f} nodes/s)")
    result["server"] = benchdb.server_settings(url)
    repo.engine.dispose()
    return result


def markdown(report: dict) -> str:
    rows = report["sizes"]
    out = [f"# SQL latency at scale ({report['name']})", "",
           (f"Synthetic trees (document > 10 chapters > 10 sections > 10 leaves), D={DIM}, clustered random "
           f"unit vectors; {rows[0]['queries'] if rows else 0} queries per size (half broad, half narrow), "
           "each function called as one SQL statement with a vector parameter over a local socket, warm (an untimed "
           "search first, then the functions in shuffled order). "
           f"HNSW m=16, ef_construction=64, ef_search=max(40, k). Server: {report['server']}."), "",
           f"hrag-pg commit: {report.get('commit', 'unknown')}", "",
           "## Latency (ms)", "",
           "| leaves | " + " | ".join(f"{f} p50 / p95" for f in FUNCTIONS) +
           " | parent_child ÷ search_leaves(20) p50 / p95 | auto_merge ÷ search_leaves(12) p50 / p95 |",
           "|---:|" + "---:|" * (len(FUNCTIONS) + 2)]
    for r in rows:
        lat, ratio = r["latency_ms"], r["ratios"]
        pc, am = ratio["parent_child/search_leaves(k=20)"], ratio["auto_merge/search_leaves(k=12)"]
        out.append(f"| {r['leaves']:,} | " + " | ".join(f"{lat[f]['p50']:.2f} / {lat[f]['p95']:.2f}" for f in FUNCTIONS)
                   + f" | {pc['p50']:.2f}× / {pc['p95']:.2f}× | {am['p50']:.2f}× / {am['p95']:.2f}× |")
    out += ["", "## Build, writes, size and ANN recall", "",
            ("| leaves | nodes | bulk: COPY s | bulk: CREATE INDEX s | bulk nodes/s (COPY + index) "
            "| index maintained: nodes/s | HNSW index | table + indexes | ANN recall@20 | ANN recall@12 |"),
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(
            f"| {r['leaves']:,} | {r['nodes']:,} | {r['bulk_write_seconds']:.1f} | {r['index_build_seconds']:.1f} "
            f"| {r['bulk_nodes_per_second']:,.0f} | {r['maintained_nodes_per_second']:,.0f} "
            f"({r['maintained_nodes']:,} nodes in {r['maintained_seconds']:.1f} s) "
            f"| {r['index_bytes'] / 2**20:,.0f} MiB | {r['table_bytes'] / 2**20:,.0f} MiB "
            f"| {r['ann_recall']['20']:.3f} | {r['ann_recall']['12']:.3f} |")
    out += ["", ("ANN recall@k: share of the exact top-k (sequential scan, `ORDER BY (embedding <=> q) + 0`) "
            f"that `hrag.search_leaves` returned, over the first {rows[0]['recall_queries'] if rows else 0} queries. "
            f"CREATE INDEX ran with maintenance_work_mem={BUILD_MEMORY}; 'index maintained' inserts "
            f"{MAINTAINED_DOCS} extra documents through `Repository.write_rows_only` into the indexed table "
            "(one transaction each), which is the cost of every incremental ingestion."), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="SQL retrieval latency on synthetic trees.")
    parser.add_argument("--full", action="store_true", help="10k, 100k and 1M leaves")
    parser.add_argument("--sizes", type=int, nargs="+", help="leaf counts (rounded down to 1,000s)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--name", help="results file name stem (default: small or full)")
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    args = parser.parse_args(argv)
    sizes = args.sizes or ([10_000, 100_000, 1_000_000] if args.full else [10_000, 100_000])
    name = args.name or ("full" if args.full else "small" if not args.sizes else "custom")
    report = run(sizes, name=name, queries=args.queries, recall_queries=args.recall_queries,
                 data_dir=args.data_dir, out=args.out)
    print(markdown(report))
    return 0


def run(sizes: list[int], *, name: str, queries: int, recall_queries: int, data_dir: Path, out: Path) -> dict:
    report: dict = {"name": name, "sizes": [], "commit": common.git_revision()}
    for leaves in sizes:
        print(f"[scale] {leaves:,} leaves", file=sys.stderr)
        report["sizes"].append(run_size(leaves, queries=queries, recall_queries=recall_queries, data_dir=data_dir,
                                        log=lambda m: print(m, file=sys.stderr, flush=True)))
    settings = report["sizes"][-1]["server"] if report["sizes"] else {}
    report["server"] = (f"PostgreSQL {settings.get('server_version')}, pgvector {settings.get('pgvector')}, "
                        f"shared_buffers {settings.get('shared_buffers')}")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"scale-{name}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / f"scale-{name}.md").write_text(markdown(report), encoding="utf-8")
    return report


if __name__ == "__main__":
    sys.exit(main())
