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
from typing import Any, TypeVar

import typer
from rich.console import Console

from . import __version__
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
def db_url(psql: bool = typer.Option(False, "--psql", help="Print the libpq form for psql instead of SQLAlchemy's.")) -> None:
    """Print the URL of the database in use (HRAG_DATABASE_URL or the embedded server)."""
    from . import db

    url = db.resolve_url(start_embedded=False)
    print(db.libpq_url(url) if psql else url)


# ---------------------------------------------------------------------- migrate


@app.command("migrate")
@clear_errors
def migrate_cmd(
    revision: str = typer.Argument("head", help="Target revision (head, or base to remove hrag)."),
    embedding_dim: int = typer.Option(None, "--embedding-dim", help="Vector dimension, first install only (default 384)."),
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


def main() -> None:
    app()


if __name__ == "__main__":
    main()
