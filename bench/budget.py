"""Context quality per token: every hrag-pg mode at fixed token budgets, on any corpus.

    python bench/budget.py --small                       # pgdocs, 40 files
    python bench/budget.py --corpus bench/.data/corpora/pystdlib \
        --questions bench/questions/pystdlib.jsonl --name pystdlib --small

Ingests the corpus once into its own database (``hrag_bench_budget_<name>``;
``--reuse`` keeps an existing one), then asks every question in each mode
with the defaults the Python API and the CLI use, and scores snippet recall
after cutting each context to the budget in the mode's own order (passages
whole while they fit, the next one cut: as ``run.py`` does).  The budget
mode (``hrag.retrieve``) chooses its context within the budget itself.
Latency is the SQL statement alone (question embedded beforehand), p50 over
the questions.  Writes ``bench/results/budget-<name>.md`` with the commit,
date and load average it ran at.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchdb
import common
import granularity
from run import git_revision

from hrag_pg import db, defaults, queries
from hrag_pg.api import HRAG
from hrag_pg.embedders import default_embedder
from hrag_pg.embedding import embed_queries
from hrag_pg.evaluation import snippets_found, truncate_passages, truncator_for
from hrag_pg.ingest.pipeline import IngestOptions

BUDGETS = (1000, 2000, 4000)
COLLECTION = "bench"
HERE = Path(__file__).resolve().parent
#: The databases the studies in studies/ (candidates.py, rare_cap.py,
#: merge_share.py, reserved_hits.py) measure on: three whole corpora of
#: different kinds (name, question file, database).  The manual's is
#: ``run.py --full``'s; the others are this script's (``--corpus ... --name``).
DATABASES = (("pgdocs", "pgdocs.jsonl", "hrag_bench_full"),
             ("pystdlib", "pystdlib.jsonl", "hrag_bench_budget_pystdlib"),
             ("nodejs", "nodejs.jsonl", "hrag_bench_budget_nodejs"))


def budget_databases(embedder: Any) -> Iterator[tuple[str, str, list[dict[str, Any]], list[Any]]]:
    """Each database of DATABASES: name, libpq URL, its answerable questions and their vectors."""
    for name, question_file, database in DATABASES:
        url = benchdb.database_url(HERE / ".data" / "pg", database)
        corpus = common.DEFAULT_CORPUS if name == "pgdocs" else HERE / ".data" / "corpora" / name
        questions = common.read_questions(HERE / "questions" / question_file)
        questions = common.answerable(questions, common.select_files(corpus, questions, small=False))
        yield name, url, questions, list(embedder.embed([q["question"] for q in questions]))


@dataclass
class BudgetDatabase:
    """A database ``bench/budget.py`` ingested, and its question set embedded once."""

    name: str
    url: str
    questions: list[dict[str, Any]]
    vectors: list[Any]


def budget_database(description: str | None) -> BudgetDatabase:
    """The command line the budget mode's speed studies share: ``--database``, ``--questions``, ``--data-dir``."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    args = parser.parse_args()
    admin = benchdb.maintenance_url(args.data_dir)
    with psycopg.connect(admin) as conn:  # before the model loads: a wrong name fails at once
        names = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'hrag_bench%'")]
    if args.database not in names:
        parser.error(f"no database {args.database!r} on {admin}; the benchmark's: {', '.join(sorted(names)) or 'none'}")
    questions = common.read_questions(args.questions)
    vectors = list(default_embedder().embed([q["question"] for q in questions]))
    return BudgetDatabase(args.database, benchdb.with_database(admin, args.database), questions, vectors)


def measured(script: str) -> str:
    """The results line saying how, when and at which commit a study ran."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"`python bench/{script}` (see its docstring). Measured {now}, load average "
            f"{os.getloadavg()[0]:.1f}; hrag-pg commit: {git_revision()}")


def plan(mode: str, search: queries.Search, budget: int) -> tuple[str, dict[str, Any]]:
    """The statement the Python layer sends for ``mode`` with its defaults (hrag_pg/queries.py builds it)."""
    if mode == "auto":
        return queries.plan_retrieve(search, defaults.AUTO_TOP_K, budget)
    if mode == "auto-merge":
        return queries.plan_auto_merge(search, defaults.TOP_K, defaults.MERGE_THRESHOLD, defaults.MAX_HIT_SHARE)
    if mode == "auto-merge-fit":
        return queries.plan_auto_merge_context(search, defaults.TOP_K, defaults.MERGE_THRESHOLD,
                                               defaults.MAX_HIT_SHARE, budget)
    if mode == "parent-child-fit":
        return queries.plan_parent_child_context(search, defaults.TOP_K_CHILDREN, defaults.MAX_PARENTS, None, budget)
    return queries.plan_parent_child(search, defaults.TOP_K_CHILDREN, defaults.MAX_PARENTS, None)


def ask_rows(conn: psycopg.Connection[Any], questions: list[dict[str, Any]], vectors: list[Any], mode: str,
             budget: int, *, candidates: int | None = None, repeat: int = 1,
             **search: Any) -> tuple[list[list[dict[str, Any]]], list[float]]:
    """Every question asked in ``mode`` as the Python layer asks it: the rows kept, and each statement's time.

    The time (ms) is the best of ``repeat`` executions; ``conn`` returns dict rows; ``search``: other
    fields of :class:`hrag_pg.queries.Search` (``min_relative_score``, ``lexical_weight``).
    """
    contexts, times = [], []
    if mode != "auto":  # parent-child's and auto-merge's own floor, as their settings default it
        search = {"min_relative_score": defaults.MIN_RELATIVE_SCORE, **search}
    for q, v in zip(questions, vectors, strict=True):
        search_of = queries.Search(query=v, text=q["question"], collection=COLLECTION, candidates=candidates,
                                   **search)
        sql, params = plan(mode, search_of, budget)
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            rows = conn.execute(sql, params).fetchall()
            best = min(best, (time.perf_counter() - started) * 1000)
        times.append(best)
        contexts.append([r for r in rows if r.get("kept") != "dropped"])  # (a fit's dropped results)
    return contexts, times


def ask_all(conn: psycopg.Connection[Any], questions: list[dict[str, Any]], vectors: list[Any], mode: str,
            budget: int, *, candidates: int | None = None, repeat: int = 1) -> tuple[list[list[str]], list[float]]:
    """As :func:`ask_rows`, each context as its passages' texts."""
    contexts, times = ask_rows(conn, questions, vectors, mode, budget, candidates=candidates, repeat=repeat)
    return [[r["content"] for r in rows] for rows in contexts], times


def question_recalls(questions: list[dict[str, Any]], contexts: list[list[str]], budget: int,
                     truncator: Any) -> list[tuple[float, int]]:
    """Each question's recall of its context cut at ``budget``, and the tokens kept.

    A question's recall is the share of its evidence snippets found verbatim in
    one passage, after the passages are cut at the budget in their own order.
    """
    out = []
    for q, passages in zip(questions, contexts, strict=True):
        kept = truncate_passages(passages, budget, truncator)
        found = snippets_found(kept, q["evidence"])
        out.append((sum(found) / len(found), sum(truncator.count(p) for p in kept)))
    return out


def recall_by_kind(questions: list[dict[str, Any]], contexts: list[list[str]], budget: int,
                   truncator: Any) -> tuple[float, float, float]:
    """Mean narrow and broad recall of the contexts cut at ``budget``, and the mean tokens kept."""
    recalls = question_recalls(questions, contexts, budget, truncator)
    recall = {kind: [r for (r, _), q in zip(recalls, questions, strict=True) if q["kind"] == kind]
              for kind in ("narrow", "broad")}
    return (statistics.mean(recall["narrow"]), statistics.mean(recall["broad"]),
            statistics.mean(t for _, t in recalls))


def granularity_by_kind(conn: psycopg.Connection[Any], questions: list[dict[str, Any]],
                        contexts: list[list[dict[str, Any]]], budget: int, truncator: Any,
                        golds: dict[str, granularity.Span | None]) -> dict[str, granularity.Granularity]:
    """Per kind: recall, share of the context inside the gold section, tokens, gold section returned whole.

    Each context is cut at ``budget`` in its own order first, as for recall.
    """
    figures: dict[str, tuple[list[float], list[float | None], list[float], list[bool | None]]] = {
        kind: ([], [], [], []) for kind in ("narrow", "broad")}
    for q, rows in zip(questions, contexts, strict=True):
        kept = truncate_passages([r["content"] for r in rows], budget, truncator)
        found = snippets_found(kept, q["evidence"])
        counts = [truncator.count(p) for p in kept]
        spans = granularity.spans_of(conn, rows[:len(kept)])
        gold = golds.get(q["id"])
        recalls, shares, tokens, returned = figures[q["kind"]]
        recalls.append(sum(found) / len(found))
        tokens.append(sum(counts))
        shares.append(None if gold is None else granularity.inside_share(spans, counts, gold))
        returned.append(None if gold is None else granularity.returns_gold(spans, gold))
    return {kind: granularity.summarize(*values) for kind, values in figures.items() if values[0]}


def fmt(figures: granularity.Granularity | None, field: str, digits: int = 2) -> str:
    """One figure of a kind for the table ("–" where the kind has no questions or no gold section)."""
    value = None if figures is None else getattr(figures, field)
    return "–" if value is None or value != value else f"{value:,.{digits}f}"


def main() -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=common.DEFAULT_CORPUS)
    parser.add_argument("--questions", type=Path, default=here / "questions" / "pgdocs.jsonl")
    parser.add_argument("--name", default="pgdocs")
    parser.add_argument("--small", action="store_true", help="40 files (the evidence files first)")
    parser.add_argument("--pack-tokens", type=int, default=None, help="ingestion packing (default: hrag's)")
    parser.add_argument("--reuse", action="store_true", help="keep an already ingested database")
    parser.add_argument("--database", help="ask an existing database of the same files instead (implies --reuse), "
                                           "e.g. hrag_bench_full from `run.py --full`: same code, no second "
                                           "ingestion of the whole manual")
    parser.add_argument("--data-dir", type=Path, default=here / ".data" / "pg")
    parser.add_argument("--model", default=None,
                        help="embedding model (default: hrag's choice for a new collection, by the corpus' script); "
                             "the results file and database get the model's name")
    args = parser.parse_args()
    revision = git_revision()  # the code this run imports, not whatever HEAD is when it ends

    questions = common.read_questions(args.questions)
    files = common.select_files(args.corpus, questions, small=args.small)
    questions = common.answerable(questions, files)
    name = f"{args.name}{'-small' if args.small else ''}" + (f"-{args.model}" if args.model else "")
    dbname = args.database or f"hrag_bench_budget_{name.replace('-', '_').replace('.', '_').lower()}"
    args.reuse = args.reuse or args.database is not None
    options = IngestOptions() if args.pack_tokens is None else IngestOptions(pack_tokens=args.pack_tokens)

    if args.reuse:
        url = db.sqlalchemy_url(benchdb.database_url(args.data_dir, dbname))
    else:
        url = benchdb.fresh_database(args.data_dir, dbname)
    hrag = HRAG(url, model=args.model)
    ingest_seconds = None
    if not args.reuse:
        started = time.perf_counter()
        report = hrag.ingest(files, collection=COLLECTION, options=options, bulk=True)
        ingest_seconds = time.perf_counter() - started
        print(f"ingested {len(report.results)} files ({report.nodes} nodes) in {ingest_seconds:.0f} s", flush=True)

    embedder = hrag.query_embedder(COLLECTION)  # the collection's model, with its query prompt
    truncator = truncator_for(embedder)
    vectors = embed_queries(embedder, [q["question"] for q in questions])
    model = hrag.collection_models(COLLECTION)[COLLECTION]
    conn = psycopg.connect(db.libpq_url(url), row_factory=dict_row)
    register_vector(conn)
    stats = conn.execute("SELECT count(*) AS leaves, round(avg(token_count)) AS tokens "
                         "FROM hrag.nodes WHERE embedding IS NOT NULL").fetchone()
    assert stats is not None
    leaves, leaf_tokens = stats["leaves"], stats["tokens"]

    modes: list[tuple[str, str, list[int]]] = [
        ("auto (hrag.retrieve, budget-aware)", "auto", list(BUDGETS)),
        ("auto-merge (top_k 12, threshold 0.5), cut", "auto-merge", [0]),
        ("auto-merge, max_context_tokens (fitted in SQL)", "auto-merge-fit", list(BUDGETS)),
        ("parent-child (20 children, 4 parents), cut", "parent-child", [0]),
        ("parent-child, max_context_tokens (fitted in SQL)", "parent-child-fit", list(BUDGETS)),
    ]
    golds = granularity.gold_spans(conn, COLLECTION, questions)
    rows: list[dict[str, Any]] = []
    for label, mode, budgets in modes:
        for budget in budgets:
            contexts, latencies = ask_rows(conn, questions, list(vectors), mode, budget or defaults.MAX_TOKENS)
            for cut in (BUDGETS if budget == 0 else [budget]):
                kinds = granularity_by_kind(conn, questions, contexts, cut, truncator, golds)
                tokens = sum(g.tokens * g.count for g in kinds.values()) / sum(g.count for g in kinds.values())
                row = {"mode": label, "budget": cut, "kinds": kinds, "tokens": tokens,
                       "p50": statistics.median(latencies)}
                rows.append(row)
                print(f"{label:45} @{cut:5}  " + "  ".join(
                    f"{kind} {g.recall:.2f} / {g.share:.2f} / {g.tokens:4.0f}" for kind, g in kinds.items())
                    + f"  p50 {row['p50']:.1f} ms", flush=True)

    load = os.getloadavg()[0]
    lines = [
        f"# Context quality per token: {name}",
        "",
        f"Corpus: {len(files)} files from `{args.corpus.name}`, {len(questions)} questions "
        f"({sum(q['kind'] == 'narrow' for q in questions)} narrow, {sum(q['kind'] == 'broad' for q in questions)} "
        f"broad) from `{args.questions.name}`; {leaves:,} search targets of {leaf_tokens:.0f} tokens on average. "
        f"Embedding model: {model.name} (tokens and budgets are this model's tokenizer's). "
        f"Ingestion options: {options}.",
        f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
        f"{load:.1f} (2 cores; latencies are the SQL statement alone and rough under load).",
        f"hrag-pg commit: {revision}" + (f"; database `{dbname}` (ingested by another run)" if args.database else ""),
        "",
        "Recall: share of a question's evidence snippets found verbatim in one passage of the context. "
        "'cut': the mode's passages in its own order, whole while they fit, the next one cut at the budget; "
        "the budget mode chooses within the budget itself; 'max_context_tokens': the passages whole by score "
        "while they fit, one that does not replaced by the budget mode's choice among its hits (hrag._fit_budget).",
        "",
        "Inside: the share of the context's tokens that lie inside the question's gold section (the article or "
        "section it names, else the deepest titled node holding all its evidence; bench/granularity.py), the mean "
        "over the questions whose section was found; tokens: the context's, per question; whole: the share of "
        f"broad questions whose gold section is itself a passage. Gold sections found for "
        f"{sum(g is not None for g in golds.values())} of {len(golds)} questions.",
        "",
        "| mode | budget | narrow recall | broad recall | mean tokens | p50 ms | narrow inside | narrow tokens "
        "| broad inside | broad tokens | broad whole |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        narrow, broad = r["kinds"].get("narrow"), r["kinds"].get("broad")
        lines.append(f"| {r['mode']} | {r['budget']:,} | {fmt(narrow, 'recall')} | {fmt(broad, 'recall')} | "
                     f"{r['tokens']:,.0f} | {r['p50']:.1f} | {fmt(narrow, 'share')} | {fmt(narrow, 'tokens', 0)} | "
                     f"{fmt(broad, 'share')} | {fmt(broad, 'tokens', 0)} | {fmt(broad, 'gold_returned')} |")
    if ingest_seconds is not None:
        lines += ["", f"Ingestion: {ingest_seconds:.0f} s (bulk load)."]
    out = here / "results" / f"budget-{name}.md"
    common.write_results(out, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
