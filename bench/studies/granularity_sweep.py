"""Granularity of every mode under settings and revisions, in rolled-back transactions.

    python bench/studies/granularity_sweep.py [--only NAME ...] [--head] \
        [--variant LABEL:setting=value,setting=value ...] [--modes auto,auto-merge,parent-child] \
        [--dump LABEL] [--out FILE]

For each database bench/budget.py ingested (DATABASES below: the regulations
in both languages, English questions over the Japanese ones, and the manuals
of the other corpora), every question is asked in each mode with the
defaults, under each variant's ``SET`` settings (``hrag.auto_*`` and the
like), and scored as bench/budget.py scores it at 2,000 tokens: recall, the
share of the context inside the question's gold section, tokens, and for
broad questions the gold section returned whole (bench/granularity.py).

``--head`` first applies the working tree's revision 0029 (its schema file,
the topic files it changes and its sums) inside the transaction, so a
database ingested at the revision before is measured with the new functions
and left as it was.  ``--dump LABEL`` prints each question's context under
that variant (titles, tokens, reasons).  Writes ``--out`` (markdown) with the
commit, date and load average when given.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the tool

import benchdb
import common
import granularity
from budget import COLLECTION, ask_rows, granularity_by_kind, measured

from hrag_pg import schema_sql
from hrag_pg.embedders import embedder_for
from hrag_pg.embedding import embed_queries
from hrag_pg.evaluation import truncator_for

BENCH = Path(__file__).resolve().parents[1]
#: (name, database, question file)
DATABASES = (
    ("regulations-ja", "hrag_bench_budget_regulations_ja", "regulations-ja.jsonl"),
    ("regulations-ja-x", "hrag_bench_budget_regulations_ja", "regulations-ja-crosslingual.jsonl"),
    ("regulations-en", "hrag_bench_budget_regulations_en", "regulations-en.jsonl"),
    ("debja", "hrag_bench_budget_debja", "debja.jsonl"),
    ("debja-x", "hrag_bench_budget_debja", "debja-crosslingual.jsonl"),
    ("pystdlib", "hrag_bench_budget_pystdlib", "pystdlib.jsonl"),
    ("nodejs", "hrag_bench_budget_nodejs", "nodejs.jsonl"),
    ("pgdocs", "hrag_bench_budget_pgdocs", "pgdocs.jsonl"),
)
BUDGET = 2000
#: What revision 0029's upgrade() runs (hrag_pg/migrations/versions/0029_question_background.py).
HEAD_STEPS = (("revision", "0029_question_background.sql"), *(("topic", t) for t in (
    "lexical.sql", "search.sql", "budget.sql", "integrity.sql", "reembed.sql")),
              ("revision", "0029_question_background_sums.sql"))


def apply_head(conn: psycopg.Connection[Any]) -> None:
    """The working tree's revision 0029, in the open transaction (on a database already at 0029:
    the working tree's topic files only)."""
    dim = conn.execute("SELECT embedding_dim FROM hrag.config").fetchone()["embedding_dim"]
    upgraded = conn.execute("SELECT to_regclass('hrag.documents') IS NOT NULL AND EXISTS (SELECT 1 FROM "
                            "pg_attribute WHERE attrelid = 'hrag.documents'::regclass "
                            "AND attname = 'embedding_sum' AND NOT attisdropped) AS done").fetchone()["done"]
    for kind, name in HEAD_STEPS:
        if upgraded and kind == "revision":
            continue
        text = schema_sql.read(name) if kind == "revision" else schema_sql.read_topic(name)
        conn.execute(schema_sql.render(text, {"embedding_dim": dim}))


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    label, _, settings = text.partition(":")
    pairs = dict(item.split("=", 1) for item in settings.split(",") if item)
    return label, {(k if "." in k else f"hrag.{k}"): v for k, v in pairs.items()}


def cell(figures: granularity.Granularity | None, broad: bool) -> str:
    if figures is None:
        return "–"
    text = f"{figures.recall:.2f} / {figures.share:.2f} / {figures.tokens:,.0f}"
    return text + (f" / {figures.gold_returned:.2f}" if broad else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", help="database names (default: all that exist)")
    parser.add_argument("--head", action="store_true", help="apply the working tree's 0029 in the transaction")
    parser.add_argument("--variant", action="append", default=[], help="LABEL:setting=value,...")
    parser.add_argument("--modes", default="auto", help="comma-separated: auto, auto-merge, parent-child, "
                                                        "auto-merge-fit, parent-child-fit")
    parser.add_argument("--dump", help="print each question's context under this variant")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()
    variants = [parse_variant(v) for v in args.variant] or [("defaults", {})]
    modes = args.modes.split(",")

    admin = benchdb.maintenance_url(args.data_dir)
    with psycopg.connect(admin) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
    lines = [f"# Granularity sweep at {BUDGET:,} tokens", "",
             "Each cell: recall / share inside the gold section / tokens (broad: / gold section whole).", ""]
    for name, database, question_file in DATABASES:
        if (args.only and name not in args.only) or database not in existing:
            continue
        url = benchdb.with_database(admin, database)
        questions = common.read_questions(BENCH / "questions" / question_file)
        with psycopg.connect(url) as conn:  # (the collection's model; the database may be a revision behind)
            model = conn.execute("SELECT model FROM hrag.collection_models WHERE collection = %s",
                                 (COLLECTION,)).fetchone()[0]
        embedder = embedder_for(model)
        truncator = truncator_for(embedder)
        vectors = list(embed_queries(embedder, [q["question"] for q in questions]))
        lines += [f"## {name} ({len(questions)} questions, {model})",
                  "", "| variant | mode | narrow | broad |", "|---|---|---|---|"]
        print(f"== {name}", flush=True)
        with psycopg.connect(url, row_factory=dict_row) as conn:
            register_vector(conn)
            golds = granularity.gold_spans(conn, COLLECTION, questions)
            conn.rollback()
            for label, settings in variants:
                if args.head:
                    apply_head(conn)
                search = {k[len("py."):]: None if v == "none" else float(v)
                          for k, v in settings.items() if k.startswith("py.")}
                for key, value in settings.items():
                    if not key.startswith("py."):
                        conn.execute("SELECT set_config(%s, %s, true)", (key, value))
                for mode in modes:
                    contexts, times = ask_rows(conn, questions, vectors, mode, BUDGET, **search)
                    kinds = granularity_by_kind(conn, questions, contexts, BUDGET, truncator, golds)
                    row = (f"| {label} | {mode} | {cell(kinds.get('narrow'), False)} | "
                           f"{cell(kinds.get('broad'), True)} |")
                    lines.append(row)
                    print(row, f"p50 {statistics.median(times):.1f} ms", flush=True)
                    if label == args.dump:
                        dump(questions, contexts, golds, conn)
                conn.rollback()
        lines.append("")
    if args.out:
        # The variants are the study: the results name the command that ran them.
        command = shlex.join(["studies/granularity_sweep.py", *sys.argv[1:]])
        common.write_results(args.out, [*lines, measured(command)])
    return 0


def dump(questions: list[dict[str, Any]], contexts: list[list[dict[str, Any]]],
         golds: dict[str, granularity.Span | None], conn: psycopg.Connection[Any]) -> None:
    for q, rows in zip(questions, contexts, strict=True):
        gold = golds.get(q["id"])
        spans = granularity.spans_of(conn, rows)
        print(f"  {q['id']} {q['kind']:6} {q.get('section', '')} : {q['question'][:60]}")
        for r, s in zip(rows, spans, strict=True):
            where = "in" if gold and gold.contains(s) else ("AROUND" if gold and s.contains(gold) else "out")
            print(f"      {where:6} {r.get('token_count', 0):5} {float(r.get('score') or 0):.3f} "
                  f"{' › '.join(p for p in (r.get('heading_path') or []) if p)[-70:]}  [{r.get('reason') or ''}]")


if __name__ == "__main__":
    raise SystemExit(main())
