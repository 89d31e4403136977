"""The lexical statistics against the number of documents: revision 0021's per-collection rows vs. the sums before.

    python bench/studies/term_statistics_scale.py --database hrag_bench_full --copies 27

Copies the (already ingested, head) database as ``<database>_scale``, adds
``--copies`` copies of every document of collection ``bench`` (their
``documents`` and ``document_terms`` rows under new ids, no nodes: the
statistics count them, the searches find only the originals), then copies
that as ``<database>_scale_0020`` and downgrades the copy to revision 0020,
whose functions sum the per-document rows.  Times, interleaved per question
on both databases, ``hrag._term_weights`` for the question's terms and
``hrag.retrieve`` at 2,000 tokens (the candidate stage reads the term
statistics, the budget step the collection's size) and auto-merge as the
Python API asks it (its hit share reads the size too), and checks that both
return the same rows.  Writes ``bench/studies/results/term-statistics-scale.md``.
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
from budget import measured

from hrag_pg import db, migrate
from hrag_pg.embedders import default_embedder

HERE = Path(__file__).resolve().parent

STATEMENTS = {
    "_term_weights(question's terms)": "SELECT * FROM hrag._term_weights(hrag.lexical_terms(%(qt)s), 'bench')",
    "retrieve(2000)": "SELECT * FROM hrag.retrieve(%(q)s, %(qt)s, 2000, 'bench')",
    # auto-merge as the Python API asks it: hybrid hits, at most a tenth of the collection (hrag.sample_hits)
    "auto-merge (hybrid, hit share 0.1)":
        "WITH hit AS (SELECT node_id, score FROM hrag.search_hybrid(%(q)s, %(qt)s, hrag.sample_hits(12, 'bench', 0.1), "
        "'bench')) SELECT * FROM hrag.auto_merge_hits(ARRAY(SELECT node_id FROM hit ORDER BY score DESC, node_id), "
        "ARRAY(SELECT score FROM hit ORDER BY score DESC, node_id), 0.5)",
}

COPY_DOCUMENTS = (
    """CREATE TEMP TABLE copied AS
       SELECT d.id AS original, gen_random_uuid() AS id, c AS copy
         FROM hrag.documents d, generate_series(1, %(copies)s) AS c
        WHERE d.collection = 'bench'""",
    """INSERT INTO hrag.documents (id, collection, source, title, content_hash, metadata, search_targets,
                                 total_tokens)
       SELECT k.id, d.collection, d.source || ' (copy ' || k.copy || ')', d.title, d.content_hash, d.metadata,
              d.search_targets, d.total_tokens
         FROM copied k JOIN hrag.documents d ON d.id = k.original""",
    """INSERT INTO hrag.document_terms (document_id, collection, term, leaves)
       SELECT k.id, t.collection, t.term, t.leaves
         FROM copied k JOIN hrag.document_terms t ON t.document_id = k.original""",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="hrag_bench_full")
    parser.add_argument("--copies", type=int, default=27)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()

    admin = benchdb.maintenance_url(args.data_dir)
    scaled, before = f"{args.database}_scale", f"{args.database}_scale_0020"
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in (before, scaled):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{scaled}" TEMPLATE "{args.database}"')
    with psycopg.connect(benchdb.with_database(admin, scaled)) as conn:
        for statement in COPY_DOCUMENTS:
            conn.execute(statement, {"copies": args.copies})
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE hrag.documents, hrag.document_terms, hrag.collection_terms, "
                     "hrag.collection_sizes")
        documents = conn.execute("SELECT count(*) FROM hrag.documents WHERE collection = 'bench'").fetchone()[0]
        rows = conn.execute("SELECT count(*) FROM hrag.document_terms").fetchone()[0]
        # (the copies have no tree: 'document_without_root' is expected, a statistics problem is not)
        problems = conn.execute("SELECT count(*) FROM hrag.check_integrity() "
                                "WHERE problem <> 'document_without_root'").fetchone()[0]
    assert problems == 0, "the copied statistics disagree with the documents"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{before}" TEMPLATE "{scaled}"')
    migrate.downgrade(db.sqlalchemy_url(benchdb.with_database(admin, before)), "0020")

    questions = common.read_questions(common.DEFAULT_QUESTIONS)
    vectors = default_embedder().embed([q["question"] for q in questions])
    conns = {"0021": psycopg.connect(benchdb.with_database(admin, scaled)),
             "0020": psycopg.connect(benchdb.with_database(admin, before))}
    for conn in conns.values():
        register_vector(conn)
    timings: dict[tuple[str, str], list[float]] = {(s, r): [] for s in STATEMENTS for r in conns}
    same = total = 0
    for p in range(args.passes + 1):  # the first pass warms the caches
        for i, (q, v) in enumerate(zip(questions, vectors, strict=True)):
            for name, sql in STATEMENTS.items():
                order = list(conns) if (i + p) % 2 else list(reversed(conns))
                got = {}
                for revision in order:
                    started = time.perf_counter()
                    got[revision] = conns[revision].execute(sql, {"q": v, "qt": q["question"]}).fetchall()
                    if p:
                        timings[(name, revision)].append((time.perf_counter() - started) * 1000)
                total += 1
                same += got["0020"] == got["0021"]
            for conn in conns.values():
                conn.rollback()

    def p50(values: list[float]) -> float:
        return statistics.median(values)

    lines = [
        "# The lexical statistics against the number of documents (revision 0021 vs 0020)", "",
        measured("studies/term_statistics_scale.py"), "",
        (f"The whole manual's database with {args.copies} copies of each of its documents' statistics rows "
         f"(no nodes): {documents:,} documents in collection `bench`, {rows:,} `document_terms` rows. "
         f"{len(questions)} questions x {args.passes} passes after a warm-up, interleaved; identical results: "
         f"{same}/{total}; load average {os.getloadavg()[0]:.1f}."), "",
        "| statement | 0020 (per-document sums) p50 / p95 ms | 0021 (per-collection rows) p50 / p95 ms "
        "| p50 0021 ÷ 0020 |",
        "|---|---:|---:|---:|",
    ]
    for name in STATEMENTS:
        b, h = sorted(timings[(name, "0020")]), sorted(timings[(name, "0021")])
        lines.append(f"| {name} | {p50(b):.2f} / {b[int(0.95 * (len(b) - 1))]:.2f} | "
                     f"{p50(h):.2f} / {h[int(0.95 * (len(h) - 1))]:.2f} | {p50(h) / p50(b):.2f}× |")
    out = HERE / "results" / "term-statistics-scale.md"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    for conn in conns.values():
        conn.close()
    with psycopg.connect(admin, autocommit=True) as conn:
        for name in (before, scaled):
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
    return 0 if same == total else 1


if __name__ == "__main__":
    raise SystemExit(main())
