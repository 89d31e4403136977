"""The ``hrag`` command line.

Every command honours ``HRAG_DATABASE_URL`` (any PostgreSQL with pgvector)
and ``HRAG_DATA_DIR`` (where the embedded server keeps its data).  Errors are
one line on stderr and a non-zero exit status; ``--json`` prints one JSON
object for scripts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console

from . import __version__, defaults
from .errors import HragError

app = typer.Typer(
    help="hrag-pg: hierarchical retrieval (Parent-Child and Auto-Merging) inside PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Manage the embedded PostgreSQL server (used when HRAG_DATABASE_URL is unset).",
                     no_args_is_help=True)
app.add_typer(db_app, name="db")

console = Console()
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def clear_errors(func: F) -> F:
    """Print HragError (and only it) as one red line and exit 1; other bugs keep their traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except HragError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from None
        except ValueError as exc:
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")


@app.callback()
def _root(version: bool = typer.Option(False, "--version", help="Print the version and exit.")) -> None:
    if version:
        console.print(__version__)
        raise typer.Exit()


# --------------------------------------------------------------------------- db


def _status_payload() -> dict[str, Any]:
    from . import embedded

    state = embedded.status()
    return {
        "data_dir": str(state.data_dir),
        "initialised": state.initialised,
        "running": state.running,
        "pid": state.pid,
        "url": state.url() if state.running else None,
        "psql_url": state.url(driver=False) if state.running else None,
    }


@db_app.command("start")
@clear_errors
def db_start(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
    """Start the embedded server (idempotent) in HRAG_DATA_DIR."""
    from . import embedded

    embedded.start()
    payload = _status_payload()
    if as_json:
        print_json(payload)
    else:
        console.print(f"embedded PostgreSQL running (pid {payload['pid']}) in {payload['data_dir']}")


@db_app.command("stop")
@clear_errors
def db_stop() -> None:
    """Stop the embedded server (from any process)."""
    from . import embedded

    console.print("stopped" if embedded.stop() else "not running")


@db_app.command("status")
@clear_errors
def db_status(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
    """Report whether the embedded server is initialised and running; exit 3 if not running."""
    payload = _status_payload()
    if as_json:
        print_json(payload)
    else:
        state = "running" if payload["running"] else ("stopped" if payload["initialised"] else "not initialised")
        console.print(f"{state}: {payload['data_dir']}" + (f" (pid {payload['pid']})" if payload["pid"] else ""))
        if payload["url"]:
            console.print(f"url: {payload['url']}", highlight=False)
    if not payload["running"]:
        raise typer.Exit(3)


@db_app.command("url")
@clear_errors
def db_url(
    psql: bool = typer.Option(False, "--psql", help="Print the libpq form for psql instead of SQLAlchemy's."),
) -> None:
    """Print the URL of the database in use (HRAG_DATABASE_URL or the embedded server)."""
    from . import db

    url = db.resolve_url(start_embedded=False)
    print(db.libpq_url(url) if psql else url)


# ---------------------------------------------------------------------- migrate


@app.command("migrate")
@clear_errors
def migrate_cmd(
    revision: str = typer.Argument("head", help="Target revision (head, or base to remove hrag)."),
    embedding_dim: int = typer.Option(
        None, "--embedding-dim", help="Vector dimension, first install only (default 384)."
    ),
) -> None:
    """Apply hrag's Alembic migrations to the database (creates schema hrag)."""
    from . import db, migrate

    url = db.resolve_url()
    db.check_reachable(url)
    if revision == "base":
        migrate.downgrade(url, "base")
        console.print("hrag removed from the database (downgraded to base)")
        return
    migrate.upgrade(url, revision, embedding_dim=embedding_dim)
    with db.engine(url).connect() as conn:
        current = migrate.current_revision(conn)
        dim = db.installed_embedding_dim(conn)
    console.print(f"migrated {db.redact(url)} to revision {current} (embedding dimension {dim})", highlight=False)


@app.command("distribute")
@clear_errors
def distribute_cmd(
    shard_count: int = typer.Option(None, "--shard-count", min=1,
                                    help="Shards per table (default: citus.shard_count)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Distribute documents and nodes by document over a Citus cluster (run `hrag migrate` first; idempotent)."""
    from . import db
    from .distribute import distribute

    url = db.resolve_url()
    db.check_reachable(url)
    rows = distribute(url, shard_count=shard_count)
    if as_json:
        print_json([{"name": r.name, "distribution": r.distribution, "action": r.action} for r in rows])
        return
    for r in rows:
        console.print(f"{r.name}: {r.action} ({r.distribution})", highlight=False)


# ----------------------------------------------------------------- shared bits


def _open() -> Any:
    """The facade on HRAG_DATABASE_URL or the embedded server, migrated to head."""
    from .api import HRAG

    return HRAG.open()


def _result_json(result: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "node_id": str(result.node_id),
        "title": result.title,
        "heading_path": result.heading_path,
        "content": result.content,
        "score": round(float(result.score), 6),
        "depth": result.depth,
        "kind": result.kind,
        "hit_ratio": result.hit_ratio,
        "token_count": result.token_count,
        "source": result.source,
        "document_id": str(result.document_id),
        "document_metadata": result.document_metadata,
        "mode": result.mode,
    }
    if result.reason is not None:
        payload["reason"] = result.reason
    if result.mode == "parent-child":
        payload["matched_children"] = [str(i) for i in result.matched_children or []]
    else:
        payload["merged_from"] = [str(i) for i in result.merged_from or []]
    return payload


def print_results(results: list[Any], *, max_lines: int | None = None) -> None:
    """Each result: a rule with rank and score; source and whole heading path; why it is here; its text."""
    from rich.rule import Rule
    from rich.text import Text

    if not results:
        console.print("[yellow]no results[/]")
        return
    for r in results:
        path = " › ".join(p for p in r.heading_path if p) or (r.title or str(r.node_id))
        # The rule carries what fits on any width; the source and the whole heading path get
        # their own wrapped line, so the part that says where the passage is is never cut.
        console.print(Rule(Text.assemble((f"#{r.rank} ", "bold"), (f"{r.score:.3f}", "green")), align="left"))
        console.print(Text.assemble((r.source or "?", "bold magenta"), (" › ", "dim"), (path, "bold cyan")),
                      soft_wrap=True)
        console.print(Text(f"{r.explanation()} · {r.kind or 'node'} · {r.token_count} tokens · {r.node_id}",
                           style="dim"), soft_wrap=True)
        body = r.content
        if max_lines is not None:
            lines = body.splitlines()
            if len(lines) > max_lines:
                body = "\n".join(lines[:max_lines]) + f"\n… ({len(lines) - max_lines} more lines)"
        console.print(body, soft_wrap=True, markup=False, highlight=False)
        console.print()


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    """An option's JSON object, or ValueError naming the option and what is wrong."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{option} is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object, got a JSON {type(value).__name__}")
    return value


def _progress_bar() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=err_console, transient=True)


# ----------------------------------------------------------------------- ingest


@app.command("ingest")
@clear_errors
def ingest_cmd(
    paths: list[Path] = typer.Argument(..., help="Files or directories (Markdown, text, HTML, PDF, Python)."),
    collection: str = typer.Option("default", "--collection", "-c", help="Collection (namespace) to write into."),
    strategy: str = typer.Option(None, "--strategy", "-s",
                                 help="Parent strategy: headings|clauses|pages|code|window (default: by file type)."),
    child: str = typer.Option("paragraph", "--child",
                              help="Child strategy: paragraph|sentence|fact|function|none (function: one child per "
                                   "top-level def/class of Python code blocks in documents; qa needs the Python API)."),
    max_child_tokens: int = typer.Option(150, help="Split children longer than this many tokens."),
    overlap_tokens: int = typer.Option(25, help="Tokens of overlap embedded with each split child."),
    max_parent_tokens: int = typer.Option(3000, help="Split parents longer than this many tokens."),
    window_tokens: int = typer.Option(1200, help="Parent size for --strategy window."),
    errors: str = typer.Option("strict", help="Invalid UTF-8: strict (refuse the file) or replace."),
    force: bool = typer.Option(False, "--force", help="Rewrite unchanged documents too (repairs missing embeddings)."),
    bulk: bool = typer.Option(False, "--bulk", help="Initial loads: drop the vector index, load, rebuild it once."),
    metadata_json: str = typer.Option(None, "--metadata",
                                      help='JSON object stored on every document written, e.g. \'{"lang": "ja"}\' '
                                           "(query --filter matches it)."),
    source: str = typer.Option(None, "--source",
                               help="Source name of the one file given, or prefix of a directory's names "
                                    "(default: the file name; a directory's files: their path relative to it)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Ingest documents: build their trees, embed the children, write each document in one transaction.

    Re-ingesting a changed file replaces its tree atomically and re-embeds only changed children.
    Unsupported files in a directory are skipped and listed.
    """
    from .ingest.pipeline import IngestOptions

    if child == "qa":
        raise ValueError("--child qa needs a question generator, which only the Python API takes: "
                         "HRAG.ingest(paths, options=IngestOptions(child='qa'), question_generator=...)")
    options = IngestOptions(strategy=strategy, child=child, max_child_tokens=max_child_tokens,  # type: ignore[arg-type]
                            overlap_tokens=overlap_tokens, max_parent_tokens=max_parent_tokens,
                            window_tokens=window_tokens, errors=errors)  # type: ignore[arg-type]
    metadata = _json_object(metadata_json, "--metadata")
    hrag = _open()
    with _progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            label = {"files": "files", "embed": "embedding", "write": "writing"}.get(stage, stage)
            if stage not in tasks:
                tasks[stage] = bar.add_task(label, total=total)
            bar.update(tasks[stage], completed=done, total=total)
            if stage != "files" and done >= total:
                bar.remove_task(tasks.pop(stage))

        report = hrag.ingest(paths, collection=collection, options=options, progress=progress, force=force,
                             bulk=bulk, metadata=metadata, source=source)
    if as_json:
        print_json({
            "collection": collection,
            "results": [r.model_dump(mode="json") for r in report.results],
            "skipped": [{"path": p, "reason": why} for p, why in report.skipped],
            "failed": [{"path": p, "error": why} for p, why in report.failed],
            "seconds": round(report.seconds, 3),
        })
    else:
        for r in report.results:
            console.print(f"{r.status:9} {r.source}  ({r.nodes} nodes, {r.embedded} embedded, {r.reused} reused)",
                          highlight=False)
        for p, why in report.skipped:
            console.print(f"[yellow]skipped[/]   {p}: {why}", highlight=False)
        for p, why in report.failed:
            err_console.print(f"[red]failed[/]    {p}: {why}", highlight=False)
        console.print(f"{len(report.results)} documents, {report.nodes} nodes, {report.embedded} texts embedded "
                      f"in {report.seconds:.1f}s", highlight=False)
    if report.failed:
        raise typer.Exit(1)


# ------------------------------------------------------------------------ query

MODES = defaults.MODES


@app.command("query")
@clear_errors
def query_cmd(
    text: str = typer.Argument(..., help="The question."),
    mode: str | None = typer.Option(None, "--mode", "-m",
                             help="parent-child (small-to-big), auto-merge, or auto (the best context within "
                                  "--max-tokens). Default: auto with --max-tokens, else parent-child."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    top_k: int = typer.Option(None, "--top-k", "-k",
                              help=f"Children to match (parent-child, default {defaults.TOP_K_CHILDREN}), "
                                   f"leaves to hit (auto-merge, {defaults.TOP_K}) or hits to select from "
                                   f"(auto, {defaults.AUTO_TOP_K})."),
    max_parents: int = typer.Option(defaults.MAX_PARENTS, "--max-parents", help="parent-child: parents to return."),
    merge_threshold: float = typer.Option(defaults.MERGE_THRESHOLD, "--merge-threshold",
                                          help="auto-merge: merge when hit children / children >= this."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Assemble at most this many tokens of context."),
    filter_json: str = typer.Option(None, "--filter", help='Metadata containment filter, e.g. \'{"lang": "ja"}\'.'),
    lexical_weight: float = typer.Option(defaults.LEXICAL_WEIGHT, "--lexical-weight",
                                         help="Weight of lexical overlap in the score (0 = vector only)."),
    min_relative_score: float = typer.Option(None, "--min-relative-score",
                                             help="Drop hits below this share of the best hit's score."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Ask a question; print the contexts and why each was returned (expanded or merged)."""
    from .retrievers import retriever_for

    if mode is None:
        mode = "auto" if max_tokens is not None else "parent-child"
    if mode not in MODES:
        raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    filter_value = _json_object(filter_json, "--filter")
    hrag = _open()
    retriever = retriever_for(hrag, mode, collection=collection, filter=filter_value, top_k=top_k,
                              max_parents=max_parents, merge_threshold=merge_threshold, max_tokens=max_tokens,
                              lexical_weight=lexical_weight, min_relative_score=min_relative_score)
    context = retriever.context(text)
    if as_json:
        payload: dict[str, Any] = {"mode": mode, "results": [_result_json(r) for r in context.results]}
        if max_tokens is not None:
            payload["total_tokens"] = context.total_tokens
            payload["dropped"] = [_result_json(r) for r in context.dropped]
        print_json(payload)
        return
    print_results(context.results)
    if context.dropped:
        console.print(f"[yellow]dropped {len(context.dropped)} results over the {max_tokens}-token budget:[/] "
                      + ", ".join(" › ".join(r.heading_path[-2:]) for r in context.dropped), highlight=False)


# ------------------------------------------------------------ show/delete/stats


@app.command("show")
@clear_errors
def show_cmd(
    node_id: str = typer.Argument(..., help="A node id (from `hrag query`)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one node: where it sits in its tree, its children, and its full text."""
    import uuid

    try:
        parsed = uuid.UUID(node_id)
    except ValueError:
        raise ValueError(f"{node_id!r} is not a node id (a UUID)") from None
    hrag = _open()
    node = hrag.repository.get_node(parsed)
    if node is None:
        raise HragError(f"no node {node_id} in this database")
    children = hrag.repository.children(parsed)
    full_text = hrag.repository.node_text(parsed)
    if as_json:
        print_json({**node.model_dump(mode="json"), "full_text": full_text,
                    "children": [{"id": str(c.id), "kind": c.kind, "title": c.title} for c in children]})
        return
    console.print(f"[bold cyan]{' › '.join(node.heading_path)}[/]  ({node.kind}, depth {node.depth}, "
                  f"{node.child_count} children, collection {node.collection})", highlight=False)
    for c in children:
        console.print(f"  └ {c.id}  {c.kind}  {c.title or c.content[:60]!s}", highlight=False)
    console.print()
    console.print(full_text, highlight=False, markup=False)


@app.command("delete")
@clear_errors
def delete_cmd(
    source: str = typer.Argument(..., help="The source (path as ingested) to delete."),
    collection: str = typer.Option("default", "--collection", "-c", help="Its collection."),
) -> None:
    """Delete a source and its whole tree (one transaction)."""
    hrag = _open()
    if not hrag.delete(source, collection):
        elsewhere = hrag.repository.collections_of(source)
        where = (f"; it is stored in collection{'s' if len(elsewhere) > 1 else ''} "
                 + ", ".join(repr(c) for c in elsewhere) + " (pass --collection)") if elsewhere else \
            "; `hrag sources` lists what is stored"
        raise HragError(f"no source {source!r} in collection {collection!r}{where}")
    console.print(f"deleted {source}", highlight=False)


@app.command("sources")
@clear_errors
def sources_cmd(
    collection: str = typer.Option(None, "--collection", "-c", help="Only this collection."),
    rename_from_paths: list[Path] = typer.Option(
        None, "--rename-from-paths",
        help="Migrate documents ingested under the old naming (the path as typed) to today's names for the "
             "files under this path (repeatable); reuses their embeddings, one transaction each."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --rename-from-paths: only show the plan."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the stored documents: source, collection, nodes, last update."""
    hrag = _open()
    if rename_from_paths:
        plans = hrag.rename_from_paths(rename_from_paths, collection=collection or "default", dry_run=dry_run)
        if as_json:
            print_json([{"path": p.path, "old": p.old, "new": p.new, "status": p.status,
                         "embedded": p.embedded} for p in plans])
            return
        for p in plans:
            arrow = f"{p.old} → {p.new}" if p.old else p.new
            console.print(f"{p.status:9} {arrow}" + ("" if p.old else f"  ({p.path})"), highlight=False)
        return
    rows = hrag.sources(collection)
    if as_json:
        print_json([{**r.model_dump(mode="json", exclude={"metadata"}), "metadata": r.metadata} for r in rows])
        return
    if not rows:
        console.print("[yellow]no documents stored[/]" + (f" in collection {collection!r}" if collection else ""))
        return
    from rich.table import Table

    table = Table("source", "collection", "nodes", "updated")
    for r in rows:
        table.add_row(r.source, r.collection, str(r.nodes), r.updated_at.strftime("%Y-%m-%d %H:%M:%S %Z"))
    console.print(table)


@app.command("stats")
@clear_errors
def stats_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Documents, nodes, embedded children and storage per collection."""
    hrag = _open()
    stats = hrag.repository.stats()
    if as_json:
        print_json(stats)
        return
    from rich.table import Table

    table = Table("collection", "documents", "nodes", "embedded", "characters")
    for row in stats["collections"]:
        table.add_row(row["collection"], str(row["documents"]), str(row["nodes"]), str(row["embedded"]),
                      f"{row['characters']:,}")
    console.print(table)
    console.print(f"embedding dimension {stats['embedding_dim']}, {stats['total_bytes'] / 1e6:.1f} MB on disk")


@app.command("check")
@clear_errors
def check_cmd(
    repair: bool = typer.Option(False, "--repair", help="Recompute child counts, ordering ranges and depths first."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Verify every tree: roots, child counts, pre-order ranges, depths, embeddings on leaves.

    Exit status 1 while problems remain (missing embeddings need a re-ingest of their document).
    """
    hrag = _open()
    fixed = hrag.repository.repair_integrity() if repair else {}
    problems = hrag.repository.check_integrity()
    if as_json:
        print_json({"repaired": fixed, "problems": problems, "ok": not problems})
    else:
        for kind, count in fixed.items():
            if count:
                console.print(f"repaired {kind}: {count}", highlight=False)
        for p in problems:
            console.print(f"[red]{p['problem']}[/] document {p['document_id']} node {p['node_id'] or '-'}: "
                          f"{p['detail']}", highlight=False)
        console.print("[green]all trees are consistent[/]" if not problems else f"{len(problems)} problems")
    if problems:
        raise typer.Exit(1)


@app.command("eval")
@clear_errors
def eval_cmd(
    questions: Path = typer.Argument(..., help="JSONL: {id, kind: narrow|broad, question, evidence: [snippets]}."),
    mode: str = typer.Option("parent-child", "--mode", "-m", help="parent-child or auto-merge."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Assemble at most this many tokens per answer."),
    lexical_weight: float = typer.Option(None, "--lexical-weight", help="Weight of lexical overlap (0 = vector only)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Measure retrieval on your own questions: snippet recall, full recall, tokens, latency, per kind."""
    from .evaluation import MODES as EVAL_MODES
    from .evaluation import evaluate, load_questions

    if mode not in EVAL_MODES:
        raise ValueError(f"--mode must be one of {', '.join(EVAL_MODES)}, got {mode!r}")
    loaded = load_questions(questions)
    settings: dict[str, Any] = {"collection": collection}
    if lexical_weight is not None:
        settings["lexical_weight"] = lexical_weight
    hrag = _open()
    with _progress_bar() as bar:
        task = bar.add_task("questions", total=len(loaded))
        report = evaluate(hrag, loaded, mode=mode, max_tokens=max_tokens,
                          progress=lambda done, total: bar.update(task, completed=done, total=total), **settings)
    if as_json:
        print_json(report.to_json())
    else:
        console.print(report.render())


# ------------------------------------------------------------------------- demo


@app.command("demo")
@clear_errors
def demo_cmd(
    max_lines: int = typer.Option(20, "--max-lines", help="Show at most this many lines of each context."),
) -> None:
    """Start the database, ingest the bundled examples, and ask the seed's questions in both modes.

    Exit status 1 if any answer does not have the promised shape.
    """
    from rich.rule import Rule

    from . import db, demo, embedded

    console.print(Rule("[bold]hrag-pg demo"))
    if not db.ENV_URL or not __import__("os").environ.get(db.ENV_URL):
        state = embedded.start()
        console.print(f"embedded PostgreSQL 18 + pgvector running in {state.data_dir}", highlight=False)
    hrag = _open()
    console.print(f"database {db.redact(hrag.url)} migrated to head", highlight=False)
    with _progress_bar() as bar:
        task = bar.add_task("ingesting examples", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"ingesting examples ({stage})", completed=done, total=total)

        reports = demo.ingest_examples(hrag, progress)
    for report in reports:
        for r in report.results:
            console.print(f"  {r.status:9} {Path(r.source).name} → collection {r.collection!r} "
                          f"({r.nodes} nodes, {r.embedded} embedded)", highlight=False)
    failures = 0
    for number, case in enumerate(demo.CASES, start=1):
        results, ok = demo.run_case(hrag, case)
        console.print()
        console.print(Rule(f"[bold]{number}. {case.title}", align="left"))
        console.print(f"[bold]Q ({case.mode}, collection {case.collection}):[/] {case.question}", highlight=False)
        console.print(f"[dim]expected: {case.expectation}[/]", highlight=False)
        if case.settings:
            settings = ", ".join(f"{k}={v}" for k, v in case.settings.items())
            console.print(f"[dim]settings: {settings} — {case.why_settings}[/]", highlight=False)
        print_results(results[:3], max_lines=max_lines)
        console.print("[bold green]✓ as expected[/]" if ok else "[bold red]✗ not as expected[/]")
        failures += not ok
    console.print()
    console.print(Rule())
    console.print(f"{len(demo.CASES) - failures} of {len(demo.CASES)} demo answers as expected. "
                  "Try: hrag query \"...\" --mode auto-merge --collection security", highlight=False)
    if failures:
        raise typer.Exit(1)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
