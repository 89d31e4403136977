"""The commands an operator runs: the embedded server, migrations, Citus, re-embedding, integrity."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import typer
from rich.text import Text

from . import core
from .core import EXIT_FAILURE, EXIT_NOT_RUNNING, app, clear_errors, db_app
from .output import console, error_line, plural, print_json, progress_bar, styled

#: Exit statuses, the same for every command (README "Exit status").
# --------------------------------------------------------------------------- db


def _status_payload() -> dict[str, Any]:
    from .. import embedded_server

    state = embedded_server.status()
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
    """Start the embedded server (idempotent) in HRAG_DATA_DIR.

    \b
    Examples:
        hrag db start
        HRAG_DATA_DIR=/srv/hrag hrag db start --json
    """
    from .. import embedded_server

    embedded_server.start()
    payload = _status_payload()
    if as_json:
        print_json(payload)
    else:
        console.print(f"embedded PostgreSQL running (pid {payload['pid']}) in {payload['data_dir']}")


@db_app.command("stop")
@clear_errors
def db_stop() -> None:
    """Stop the embedded server (from any process).

    \b
    Examples:
        hrag db stop
    """
    from .. import embedded_server

    console.print("stopped" if embedded_server.stop() else "not running")


@db_app.command("status")
@clear_errors
def db_status(as_json: bool = typer.Option(False, "--json", help="Print the status as JSON.")) -> None:
    """Report whether the embedded server is initialised and running; exit 3 if not running.

    \b
    Examples:
        hrag db status
        hrag db status --json
    """
    payload = _status_payload()
    if as_json:
        print_json(payload)
    else:
        state = "running" if payload["running"] else ("stopped" if payload["initialised"] else "not initialised")
        console.print(f"{state}: {payload['data_dir']}" + (f" (pid {payload['pid']})" if payload["pid"] else ""))
        if payload["url"]:
            console.print(f"url: {payload['url']}")
    if not payload["running"]:
        raise typer.Exit(EXIT_NOT_RUNNING)


@db_app.command("url")
@clear_errors
def db_url(
    psql: bool = typer.Option(False, "--psql", help="Print the libpq form for psql instead of SQLAlchemy's."),
) -> None:
    """Print the URL of the database in use (HRAG_DATABASE_URL or the embedded server); exit 3 if not running.

    \b
    Examples:
        psql "$(hrag db url --psql)"
    """
    from .. import db, embedded_server

    if not os.environ.get(db.ENV_URL) and not embedded_server.status().running:
        error_line(f"the embedded PostgreSQL in {embedded_server.data_dir()} is not running: "
                   "start it with `hrag db start`")
        raise typer.Exit(EXIT_NOT_RUNNING)
    url = db.resolve_url(start_embedded=False)
    print(db.libpq_url(url) if psql else url)


# ---------------------------------------------------------------------- migrate


@app.command("migrate")
@clear_errors
def migrate_cmd(
    revision: str = typer.Argument("head", help="Target revision: head, base (removes hrag), or an id like 0004."),
    embedding_dim: int = typer.Option(None, "--embedding-dim",
                                      help="Vector dimension, fixed at the first migration (default 384)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Confirm a downgrade (base deletes every document)."),
) -> None:
    """Apply hrag's Alembic migrations to the database (creates schema hrag).

    A downgrade needs --yes (or a confirmation typed at a terminal); `base`
    removes hrag and every stored document.

    \b
    Examples:
        hrag migrate
        hrag migrate --embedding-dim 768      (a new database only)
        hrag migrate base --yes               (remove hrag and its data)
    """
    from .. import db, migrate

    migration = migrate.plan(revision, embedding_dim=embedding_dim)
    if migration.direction == "downgrade" and not yes:
        what = migration.downgrade_warning()
        if not sys.stdin.isatty():
            raise ValueError(f"{what}; add --yes to confirm")
        if not typer.confirm(f"{what}. Continue?", default=False):
            error_line("cancelled; nothing was changed")
            raise typer.Exit(EXIT_FAILURE)
    reached = migrate.carry_out(migration)
    url, current = migration.url, migration.current
    with db.engine(url).connect() as conn:
        dim = db.installed_embedding_dim(conn) if reached is not None else None
    if reached is None:
        console.print(f"hrag removed from {db.redact(url)} (at base)")
    elif reached == current:
        console.print(f"{db.redact(url)} is already at revision {reached} (embedding dimension {dim})")
    else:
        console.print(f"migrated {db.redact(url)} from revision {current or 'none'} to {reached} "
                      f"(embedding dimension {dim})")


@app.command("distribute")
@clear_errors
def distribute_cmd(
    shard_count: int = typer.Option(None, "--shard-count", min=1,
                                    help="Shards per table (default: citus.shard_count)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Distribute documents and nodes by document over a Citus cluster (run `hrag migrate` first; idempotent)."""
    from .. import db
    from ..distribute import distribute

    url = db.resolve_url()
    db.check_reachable(url)
    rows = distribute(url, shard_count=shard_count)
    if as_json:
        print_json([{"name": r.name, "distribution": r.distribution, "action": r.action} for r in rows])
        return
    for r in rows:
        console.print(f"{r.name}: {r.action} ({r.distribution})", highlight=False)


@app.command("reembed")
@clear_errors
def reembed_cmd(
    collection: str = typer.Option(..., "--collection", "-c", help="The collection to switch."),
    model: str = typer.Option(None, "--model",
                              help="The model to switch to: all-MiniLM-L6-v2 (minilm), multilingual-e5-small-q4 "
                                   "(e5), or a sentence-transformers name or folder."),
    cancel: bool = typer.Option(False, "--cancel", help="Forget an unfinished reembed instead (its prepared vectors)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Switch a collection to another embedding model, in place.

    The new vectors and token counts are written beside the old ones, one
    document per transaction, then swapped in for the whole collection in one
    transaction: queries meanwhile use the old model and see all of the
    collection, never a mix. Interrupted, run the same command again: it
    resumes with the documents not yet done.

    \b
    Examples:
        hrag reembed -c manuals-ja --model e5
        hrag reembed -c manuals-ja --cancel
    """
    if cancel == (model is not None):
        raise ValueError("give --model NAME to switch, or --cancel to forget an unfinished switch")
    hrag = core.open_hrag()
    hrag.reader.require_collection(collection)
    if cancel:
        cancelled = hrag.writer.cancel_reembed(collection)
        if as_json:
            print_json({"collection": collection, "cancelled": cancelled})
        else:
            console.print(Text(f"cancelled the unfinished reembed of {collection}" if cancelled
                               else f"no reembed of {collection} was under way"))
        return
    with progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task("re-embedding documents", total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = hrag.writer.reembed(collection, model, progress=progress)
    if as_json:
        print_json(dataclasses.asdict(report))
        return
    if report.status == "unchanged":
        console.print(Text(f"collection {collection} is already embedded with {report.model}: nothing to do"))
        return
    console.print(Text(
        f"switched {collection} from {report.previous_model} to {report.model}: "
        f"{plural(report.documents, 'document')} ({report.resumed:,} prepared by an earlier run), "
        f"{plural(report.embedded, 'text')} embedded, {plural(report.switched, 'node')} switched "
        f"in {report.seconds:.1f}s"))


@app.command("check")
@clear_errors
def check_cmd(
    repair: bool = typer.Option(False, "--repair", help="Repair what can be repaired first (owner only)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Verify every tree (roots, child counts, pre-order ranges, depths, embeddings) and the vector index.

    --repair rebuilds a missing or invalid vector index and recomputes child
    counts, ordering ranges and depths; it needs the owner's rights (a reader
    runs the read-only check). Exit status 1 while problems remain (missing
    embeddings need a re-ingest of their document).

    \b
    Examples:
        hrag check
        hrag check --repair --json
    """

    report = core.open_hrag().administration.check(repair=repair)
    problems = report.problems
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        for kind, count in report.repaired.items():
            if count:
                console.print(f"repaired {kind}: {count}")
        for p in problems:
            console.print(styled((p.problem, "red"), f" document {p.document_id or '-'} node "
                                 f"{p.node_id or '-'}: {p.detail}"))
        console.print(styled(("all trees are consistent", "green")) if not problems
                      else plural(len(problems), "problem"))
    if problems:
        raise typer.Exit(EXIT_FAILURE)
