"""The ``hrag`` command line.

Every command honours ``HRAG_DATABASE_URL`` (any PostgreSQL with pgvector)
and ``HRAG_DATA_DIR`` (where the embedded server keeps its data).  Errors are
one line on stderr and a non-zero exit status; ``--json`` prints one JSON
object for scripts.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import sys
from collections.abc import Callable, Container, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text
from typer import _click as click  # typer vendors click: its exceptions and classes, not click's
from typer._click import exceptions as click_exceptions
from typer._click.core import ParameterSource
from typer.core import TyperArgument, TyperGroup

from . import __version__, defaults, limits
from .errors import HragError

#: Exit statuses, the same for every command (README "Exit status").
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_RUNNING, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Set to 1 to see the traceback of an unexpected error (a bug) instead of one line.
ENV_DEBUG = "HRAG_DEBUG"

#: Metavars shown in help instead of typer's ``<int>`` tags.
_METAVARS: dict[Any, str] = {int: "N", float: "X", str: "TEXT", Path: "PATH"}


def _plain_metavars(command: click.Command) -> None:
    """Options get a plain metavar (N, X, TEXT, PATH) instead of ``<int>``, arguments their name; flags none."""
    for param in command.params:
        if param.metavar is not None or getattr(param, "is_flag", False):
            continue
        annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
        element = getattr(annotation, "__args__", (annotation,))[0]
        name = _METAVARS.get(element, "VALUE")
        if isinstance(param, TyperArgument):
            param.metavar = (param.name or name).upper()  # the argument's own name: PATHS, NODE_ID
            setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010 - the metavar says it
        else:
            param.metavar = name
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)


def error_line(message: str) -> None:
    """One line on stderr: never wrapped, never markup, no blank line before it."""
    one_line = " ".join(str(message).split("\n")).strip()
    err_console.print(Text.assemble(("error:", "bold red"), " ", one_line), soft_wrap=True)


def report_interrupt(detail: str | None = None) -> None:
    """Say "interrupted" (and ``detail``), and make sure the exit status that follows is 130, not a death by SIGINT.

    CPython flags a KeyboardInterrupt that ends a *string* ``exec``/``eval``
    as unhandled, even when a caller catches it, and under ``python -m``
    the interpreter then kills itself with SIGINT after the 130 was chosen.
    Ctrl-C during a lazy import lands there often: dataclasses build their
    methods with ``exec`` (seen: torch's, while the model loads).  Every
    string ``exec`` clears the flag when it starts, so an empty one forgets
    the interrupt just handled; it runs only after one was caught.
    """
    exec("pass", {})  # a constant string: resets the unhandled-interrupt flag
    error_line("interrupted" + (f": {detail}" if detail else ""))


def _dash_hint(exc: click_exceptions.UsageError, path: str) -> str:
    """How to pass text that starts with "-" (a question about `--track-origins`), when that is likely the case.

    Click takes such an argument for an unknown option; an option that is
    merely misspelt gets Click's own "Did you mean" instead.
    """
    if not isinstance(exc, click_exceptions.NoSuchOption) or exc.possibilities:
        return ""
    return f"; to pass text that starts with '-', put -- before it: {path} [OPTIONS] -- {shlex.quote(exc.option_name)}"


class HragGroup(TyperGroup):
    """The root command: every failure ends as one line on stderr and a documented exit status."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain_metavars(self)

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None,  # type: ignore[override]
             complete_var: str | None = None, standalone_mode: bool = True, **extra: Any) -> Any:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_exceptions.NoArgsIsHelpError as exc:
            sys.stdout.write(exc.ctx.get_help() + "\n")
            code = EXIT_USAGE
        except click_exceptions.UsageError as exc:
            path = exc.ctx.command_path if exc.ctx is not None else "hrag"
            error_line(f"{path}: {exc.format_message()}{_dash_hint(exc, path)} (see `{path} -h`)")
            code = exc.exit_code
        except click.ClickException as exc:
            error_line(exc.format_message())
            code = exc.exit_code
        except typer.Abort:
            report_interrupt()
            code = EXIT_INTERRUPTED
        except Exception as exc:
            if os.environ.get(ENV_DEBUG):
                raise
            error_line(f"unexpected {type(exc).__name__}: {exc} (a bug in hrag-pg; set {ENV_DEBUG}=1 "
                       "for the traceback and report it)")
            code = EXIT_FAILURE
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else EXIT_OK)


app = typer.Typer(
    cls=HragGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
db_app = typer.Typer(help="Manage the embedded PostgreSQL server (used when HRAG_DATABASE_URL is unset).\n\n"
                          "\b\nExamples:\n    hrag db start\n    hrag db status --json\n    hrag db stop",
                     no_args_is_help=True, rich_markup_mode=None)
app.add_typer(db_app, name="db")

#: Markup off everywhere: stored text, names and paths print literally; styles come from Text.
#: soft_wrap: long lines (paths, errors) are never cut at the terminal's width, so they stay greppable.
console = Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)
F = TypeVar("F", bound=Callable[..., Any])


def clear_errors(func: F) -> F:
    """HragError: one line, exit 1; ValueError (bad arguments): one line, exit 2; Ctrl-C: exit 130.

    With ``--json`` the error is also printed as JSON on stdout, ``{"error": "..."}``,
    so that a script reading stdout gets valid JSON whatever the outcome.
    """

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return func(*args, **kwargs)
        except ValueError as exc:  # includes InvalidArgument: the caller's values are out of range
            _fail(str(exc), as_json)
            raise typer.Exit(EXIT_USAGE) from None
        except HragError as exc:
            _fail(str(exc), as_json)
            raise typer.Exit(EXIT_FAILURE) from None
        except KeyboardInterrupt:
            report_interrupt()
            if as_json:
                print_json({"error": "interrupted"})
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


def _fail(message: str, as_json: bool) -> None:
    error_line(message)
    if as_json:
        print_json({"error": " ".join(message.split("\n")).strip()})


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")


def print_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Container[int] = ()) -> None:
    """A table as aligned plain columns, every value whole and literal.

    Never cut or wrapped to the terminal's width: what is shown (a source, a
    collection) is what a user copies into the next command (`hrag delete`, `-c`).
    """
    from rich.cells import cell_len

    widths = [max([cell_len(h)] + [cell_len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        cells = [(" " * (w - cell_len(v)) + v) if i in right else (v + " " * (w - cell_len(v)))
                 for i, (v, w) in enumerate(zip(values, widths, strict=True))]
        return "  ".join(cells).rstrip()

    console.print(Text(line(headers), style="bold"))
    for r in rows:
        console.print(Text(line(r)))


def styled(*parts: str | tuple[str, str]) -> Text:
    """Literal text with optional styles: ``styled(("failed", "red"), " ", path)``."""
    return Text.assemble(*parts)


def _print_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"hrag-pg {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", help="Print the version and exit.", is_eager=True,
                                 callback=_print_version),
) -> None:
    """hrag-pg: hierarchical retrieval (Parent-Child and Auto-Merging) inside PostgreSQL.

    Exit status: 0 ok, 1 failure or problems found, 2 usage error, 3 server not running, 130 interrupted.

    \b
    Examples:
        hrag demo
        hrag ingest docs/ -c manuals
        hrag query "How do I rotate the keys?" -c manuals
    """


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
    """Start the embedded server (idempotent) in HRAG_DATA_DIR.

    \b
    Examples:
        hrag db start
        HRAG_DATA_DIR=/srv/hrag hrag db start --json
    """
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
    """Stop the embedded server (from any process).

    \b
    Examples:
        hrag db stop
    """
    from . import embedded

    console.print("stopped" if embedded.stop() else "not running")


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
    from . import db, embedded

    if not os.environ.get(db.ENV_URL) and not embedded.status().running:
        error_line(f"the embedded PostgreSQL in {embedded.data_dir()} is not running: start it with `hrag db start`")
        raise typer.Exit(EXIT_NOT_RUNNING)
    url = db.resolve_url(start_embedded=False)
    print(db.libpq_url(url) if psql else url)


# ---------------------------------------------------------------------- migrate


def _counts(url: str) -> tuple[int, int]:
    """(documents, collections) stored, or (0, 0) before the first migration."""
    import sqlalchemy as sa

    from . import db

    with db.engine(url).connect() as conn:
        if conn.execute(sa.text("SELECT to_regclass('hrag.documents')")).scalar() is None:
            return 0, 0
        row = conn.execute(sa.text("SELECT count(*), count(DISTINCT collection) FROM hrag.documents")).one()
    return int(row[0]), int(row[1])


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (plural or word + 's')}"


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
    from . import db, migrate

    known = migrate.revisions()
    aliases = {"head": known[-1], "base": None}
    if revision not in aliases and revision not in known:
        raise ValueError(f"unknown revision {revision!r}; choose head, base or one of {', '.join(known)}")
    if embedding_dim is not None:
        from .schema_sql import validate_dim

        validate_dim(embedding_dim)
    target = aliases.get(revision, revision)
    url = db.resolve_url()
    db.check_reachable(url)
    with db.engine(url).connect() as conn:
        current = migrate.current_revision(conn)
        installed_dim = db.installed_embedding_dim(conn) if current is not None else None
    if embedding_dim is not None and installed_dim is not None and embedding_dim != installed_dim:
        raise HragError(
            f"this database stores {installed_dim}-dimensional vectors; the dimension is fixed when hrag is "
            f"first installed. To use {embedding_dim}: migrate a new, empty database with --embedding-dim "
            f"{embedding_dim}, or remove hrag here first (`hrag migrate base --yes`, deletes every document)"
        )
    position = {rev: i for i, rev in enumerate(known)}
    here = -1 if current is None else position.get(current, len(known))
    there = -1 if target is None else position[target]
    if there < here:
        documents, collections = _counts(url)
        if target is None:
            what = (f"downgrading {db.redact(url)} to base removes hrag and deletes "
                    f"{_plural(documents, 'document')} in {_plural(collections, 'collection')}")
        else:
            what = (f"downgrading {db.redact(url)} from {current} to {target} removes the features of the later "
                    f"revisions ({_plural(documents, 'document')} stay stored)")
        if not yes:
            if not sys.stdin.isatty():
                raise ValueError(f"{what}; add --yes to confirm")
            if not typer.confirm(f"{what}. Continue?", default=False):
                error_line("cancelled; nothing was changed")
                raise typer.Exit(EXIT_FAILURE)
        migrate.downgrade(url, target or "base")
    elif there > here:
        migrate.upgrade(url, target or "head", embedding_dim=embedding_dim)
    with db.engine(url).connect() as conn:
        reached = migrate.current_revision(conn)
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


#: ``--model``'s help, shared by the commands that embed.
MODEL_HELP = ("Embedding model: all-MiniLM-L6-v2 (minilm), multilingual-e5-small-q4 (e5), or a sentence-transformers "
              "name or folder. Default: HRAG_EMBEDDING_MODEL, else the model the collection recorded, else for a new "
              "collection by the script of its first documents (Japanese, Chinese, Korean: e5; otherwise MiniLM).")


def _open(model: str | None = None) -> Any:
    """The facade on HRAG_DATABASE_URL or the embedded server (migrated to head if behind).

    An upgrade of a schema that was installed is said in one line on stderr: an operator who
    rolled back with ``hrag migrate REV`` must not have it undone unseen.
    """
    from . import migrate
    from .api import HRAG

    if model is not None and not model.strip():
        raise ValueError("--model must not be empty")
    hrag = HRAG.open(model=model)
    if hrag.upgraded_from is not None:
        err_console.print(f"note: upgraded the hrag schema from revision {hrag.upgraded_from} to "
                          f"{migrate.head_revision()}, which this hrag-pg needs")
    return hrag


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


def heading_after_source(result: Any) -> str:
    """The heading path to print after a result's source, without repeating it.

    A Python file's top group has the file name as its whole heading path, and
    "shlex.py › shlex.py" says nothing twice; a result with no heading path
    at all falls back to its title, or to nothing (the source alone).
    """
    path = [p for p in result.heading_path if p]
    if not path:
        return result.title or ""  # (the node id is on the next line already)
    if result.source and path[0] == result.source:
        path = path[1:]
    return " › ".join(path)


def print_results(results: list[Any], *, max_lines: int | None = None) -> None:
    """Each result: a rule with rank and score; source and whole heading path; why; its text (all literal)."""
    from rich.rule import Rule

    if not results:
        console.print(styled(("no results", "yellow")))
        return
    for r in results:
        path = heading_after_source(r)
        # The rule carries what fits on any width; the source and the whole heading path get
        # their own wrapped line, so the part that says where the passage is is never cut.
        console.print(Rule(styled((f"#{r.rank} ", "bold"), (f"{r.score:.3f}", "green")), align="left"))
        where = ((" › ", "dim"), (path, "bold cyan")) if path else ()
        console.print(styled((r.source or "?", "bold magenta"), *where), soft_wrap=True)
        console.print(styled((f"{r.explanation()} · {r.kind or 'node'} · {r.token_count} tokens · {r.node_id}",
                              "dim")), soft_wrap=True)
        body = r.content
        if max_lines is not None:
            lines = body.splitlines()
            if len(lines) > max_lines:
                body = "\n".join(lines[:max_lines]) + f"\n… ({len(lines) - max_lines} more lines)"
        console.print(body, soft_wrap=True)
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

    # Only on a terminal: redirected, a transient bar would leave a blank line on stderr.  What
    # a command prints meanwhile goes above the bar; stdout only when it is that terminal too
    # (redirected, stdout must stay in its file, not be drawn on the bar's stderr).
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True, disable=not err_console.is_terminal,
                    redirect_stdout=console.is_terminal)


def _check_fraction(value: float | None, option: str, *, zero_allowed: bool) -> None:
    if value is not None:
        limits.check_fraction(value, option, zero_allowed=zero_allowed)


# ----------------------------------------------------------------------- ingest


def _without_path(path: str, message: str) -> str:
    """``message`` without a leading ``path: `` (the report names the path already)."""
    return message.removeprefix(f"{path}: ")


@app.command("ingest")
@clear_errors
def ingest_cmd(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., help="Files or directories (Markdown, text, HTML, PDF, Python)."),
    collection: str = typer.Option("default", "--collection", "-c", help="Collection (namespace) to write into."),
    strategy: str | None = typer.Option(None, "--strategy", "-s",
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
    replace: bool = typer.Option(False, "--replace",
                                 help="Let a file replace the stored document of the same name although that one "
                                      "was ingested from another file that still exists (by default that file "
                                      "fails, naming both)."),
    bulk: bool = typer.Option(False, "--bulk",
                              help="Initial loads: drop the vector index, load, rebuild it once (meanwhile every "
                                   "query of the database, in any collection, scans without it)."),
    metadata_json: str = typer.Option(None, "--metadata",
                                      help='JSON object stored on every document written, e.g. \'{"lang": "ja"}\' '
                                           "(query --filter matches it)."),
    source: str = typer.Option(None, "--source",
                               help="Source name of the one file given, or prefix of a directory's names "
                                    "(default: the file name; a directory's files: their path relative to it; a file "
                                    "already stored keeps the name it is stored under)."),
    model: str = typer.Option(None, "--model", help=MODEL_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Ingest documents: build their trees, embed the children, write each document in one transaction.

    Re-ingesting a changed file replaces its tree atomically and re-embeds only
    changed children; unchanged files are recognised from their content hash
    without loading the model. Unsupported and empty files found in a directory
    are skipped and listed; a file named explicitly must be supported, and
    paths that hold no file to read are an error (exit 2). Read by default:
    Markdown and text (.md, .markdown, .txt), reStructuredText (.rst), HTML,
    PDF and Python files; files named README, NEWS, copyright and the like;
    and any of these but PDF compressed as .gz (as Debian installs its
    documentation). Files over 20 MB (decompressed) or with a line over
    100,000 characters are refused.

    \b
    Examples:
        hrag ingest docs/ -c manuals
        hrag ingest rules.md --strategy clauses -c hr
        hrag ingest corpus/ -c big --bulk --json
        hrag ingest /usr/share/doc/manpages-ja -c ja --model e5
    """
    from .ingest.loaders import STRATEGIES, file_type_of, iter_supported_files, nothing_to_ingest, unsupported_reason
    from .ingest.pipeline import IngestOptions

    if child == "qa":
        raise ValueError("--child qa needs a question generator, which only the Python API takes: "
                         "HRAG.ingest(paths, options=IngestOptions(child='qa'), question_generator=...)")
    limits.check_count(max_child_tokens, "--max-child-tokens", maximum=limits.MAX_CHUNK_TOKENS)
    limits.check_nonnegative(overlap_tokens, "--overlap-tokens", maximum=limits.MAX_CHUNK_TOKENS)
    if overlap_tokens >= max_child_tokens:
        raise ValueError(f"--overlap-tokens ({overlap_tokens}) must be less than --max-child-tokens "
                         f"({max_child_tokens}): the overlap is embedded with each piece")
    limits.check_count(max_parent_tokens, "--max-parent-tokens", maximum=limits.MAX_CHUNK_TOKENS)
    limits.check_count(window_tokens, "--window-tokens", maximum=limits.MAX_CHUNK_TOKENS)
    if strategy is None or strategy in STRATEGIES:  # (an unknown one is refused below, naming the known ones)
        _refuse_options_of_other_modes(ctx, "--strategy", strategy, strategy or "the one chosen by file type", {
            "window_tokens": ("--window-tokens", ("window",))})
    if errors not in ("strict", "replace"):
        raise ValueError(f"--errors must be strict or replace, got {errors!r}")
    if not collection.strip():
        raise ValueError("--collection must not be empty")
    if source is not None and (not source.strip() or len(paths) != 1):
        raise ValueError("--source must not be empty" if not source.strip() else
                         f"--source names one file or prefixes one directory, but {len(paths)} paths were given")
    for path in paths:
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
        if path.is_file() and strategy is None and file_type_of(path) is None:
            raise ValueError(f"{path}: {unsupported_reason(path)}; pass --strategy to read it as text")
    readable, skipped = iter_supported_files(paths, any_named_file=strategy is not None)
    if not readable:  # "0 documents" with exit 0 would pass for success in a script
        raise ValueError(nothing_to_ingest(paths, skipped))
    options = IngestOptions(strategy=strategy, child=child, max_child_tokens=max_child_tokens,  # type: ignore[arg-type]
                            overlap_tokens=overlap_tokens, max_parent_tokens=max_parent_tokens,
                            window_tokens=window_tokens, errors=errors)  # type: ignore[arg-type]
    metadata = _json_object(metadata_json, "--metadata")
    # What is done so far, file by file: printed as each file finishes (also when stdout is
    # a pipe), and counted when Ctrl-C stops the run (each document is its own transaction).
    done: list[Any] = []
    failed: list[tuple[str, str]] = []
    now: dict[str, Any] = {"path": None, "total": len(readable)}

    def on_done(path: Path, result: Any, error: str | None) -> None:
        now["path"] = None
        if result is not None:
            done.append(result)
            if not as_json:
                console.print(f"{result.status:9} {result.source}  ({_plural(result.nodes, 'node')}, "
                              f"{result.embedded:,} embedded, {result.reused:,} reused)")
        else:
            failed.append((str(path), _in_cli_words(_without_path(str(path), error or ""))))
            if not as_json:
                err_console.print(styled(("failed", "red"), f"    {failed[-1][0]}: {failed[-1][1]}"), soft_wrap=True)

    hrag = None
    try:
        with _progress_bar() as bar:
            opening = bar.add_task("opening the database", total=None)  # visible from the first second
            hrag = _open(model)
            bar.remove_task(opening)
            tasks: dict[str, Any] = {}

            def on_file(path: Path, index: int, total: int) -> None:
                now.update(path=path, total=total)
                if "files" not in tasks:
                    tasks["files"] = bar.add_task("files", total=total)
                bar.update(tasks["files"], description=f"reading {path}", completed=index - 1, total=total)
                bar.refresh()

            def progress(stage: str, done: int, total: int) -> None:
                label = {"files": "files", "embed": "embedding", "write": "writing"}.get(stage, stage)
                if stage not in tasks:
                    tasks[stage] = bar.add_task(label, total=total)
                bar.update(tasks[stage], completed=done, total=total)
                if stage != "files" and done >= total:
                    bar.remove_task(tasks.pop(stage))

            report = hrag.ingest(paths, collection=collection, options=options, progress=progress, force=force,
                                 bulk=bulk, metadata=metadata, source=source, on_file=on_file, replace=replace,
                                 on_done=on_done)
    except KeyboardInterrupt:
        stopped_in = now["path"]
        not_started = max(now["total"] - len(done) - len(failed) - (stopped_in is not None), 0)
        index_gone = bulk and hrag is not None and hrag.repository.vector_index_state(default="valid") != "valid"
        report_interrupt(_interrupted(done, failed, stopped_in, not_started, index_gone))
        if as_json:
            print_json({"collection": collection, "results": [r.model_dump(mode="json") for r in done],
                        "failed": [{"path": p, "error": why} for p, why in failed],
                        "interrupted": {"not_written": None if stopped_in is None else str(stopped_in),
                                        "not_started": not_started, "vector_index_missing": index_gone}})
        raise typer.Exit(EXIT_INTERRUPTED) from None
    recorded = hrag.collection_models(collection).get(collection)
    if as_json:
        print_json({
            "collection": collection,
            "model": _model_json(recorded),
            "results": [r.model_dump(mode="json") for r in report.results],
            "skipped": [{"path": p, "reason": why} for p, why in report.skipped],
            "failed": [{"path": p, "error": why} for p, why in failed],
            "seconds": round(report.seconds, 3),
        })
    else:
        for p, why in report.skipped:
            console.print(styled(("skipped", "yellow"), f"   {p}: {why}"))
        console.print(f"{_plural(len(report.results), 'document')}, {_plural(report.nodes, 'node')}, "
                      f"{_plural(report.embedded, 'text')} embedded in {report.seconds:.1f}s"
                      + (f" (model {recorded.name})" if recorded else "")
                      + (f"; {_plural(len(failed), 'file')} failed" if failed else ""))
    if report.failed:
        raise typer.Exit(EXIT_FAILURE)


def _in_cli_words(message: str) -> str:
    """A library message with the Python argument it suggests named as the CLI option instead."""
    return message.replace("errors='replace'", "--errors replace")


def _interrupted(done: list[Any], failed: list[tuple[str, str]], stopped_in: Path | None, not_started: int,
                 index_gone: bool) -> str:
    """What an interrupted ingest leaves: what was written (kept: one transaction per document) and what was not."""
    unchanged = sum(r.status == "unchanged" for r in done)
    parts = [f"{_plural(len(done) - unchanged, 'document')} written"
             + (f" and {unchanged:,} unchanged" if unchanged else "") + " (kept)"]
    if failed:
        parts.append(f"{_plural(len(failed), 'file')} failed")
    if stopped_in is not None:
        parts.append(f"{stopped_in} not written")
    parts.append(f"{_plural(not_started, 'file')} not started")
    advice = "run the same command again to ingest the rest"
    if index_gone:
        advice += ("; the vector index was not rebuilt (searches scan every row): `hrag check --repair` "
                   "or the next `hrag ingest --bulk` builds it")
    return ", ".join(parts) + f"; {advice}"


# ------------------------------------------------------------------------ query

MODES = defaults.MODES


def _chosen_mode(mode: str | None, max_tokens: int | None) -> str:
    """``--mode`` as given, or the default query and eval share: auto with a budget, else parent-child."""
    if mode is None:
        mode = "auto" if max_tokens is not None else "parent-child"
    if mode not in MODES:
        raise ValueError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def _given(ctx: click.Context, param: str) -> bool:
    """Whether the user typed this option (its value is not just the default)."""
    return ctx.get_parameter_source(param) is ParameterSource.COMMANDLINE


def _refuse_options_of_other_modes(ctx: click.Context, selector: str, chosen: str | None, in_use: str,
                                   options: dict[str, tuple[str, tuple[str, ...]]]) -> None:
    """An option typed for another mode (or strategy) than the one in use is a usage error naming both.

    ``options`` maps a parameter to its option name and the modes it applies
    to; ``selector`` is the option choosing the mode, ``chosen`` the mode in
    use and ``in_use`` how to name it (a default says so).  An option left at
    its default is never an error.
    """
    for param, (option, modes) in options.items():
        if chosen not in modes and _given(ctx, param):
            raise ValueError(f"{option} applies to {selector} {' or '.join(modes)} only, not {in_use}; "
                             f"drop {option} or pass {selector} {modes[0]}")


def _check_collection(hrag: Any, collection: str | None) -> None:
    """A query on a collection that does not exist is an error naming those that do."""
    if collection is None:
        return
    existing = hrag.repository.collections()
    if collection not in existing:
        raise HragError(f"no collection {collection!r} in this database; collections: "
                        f"{', '.join(existing) if existing else '(none: ingest something first)'}")


@app.command("query")
@clear_errors
def query_cmd(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The question."),
    mode: str | None = typer.Option(None, "--mode", "-m",
                             help="parent-child (small-to-big), auto-merge, or auto (the best context within "
                                  "--max-tokens). Default: auto with --max-tokens, else parent-child."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    top_k: int = typer.Option(None, "--top-k", "-k",
                              help=f"Children to match (parent-child, default {defaults.TOP_K_CHILDREN}), "
                                   f"leaves to hit (auto-merge, {defaults.TOP_K}) or hits to select from "
                                   f"(auto, {defaults.AUTO_TOP_K}); 1 to 1000."),
    max_parents: int = typer.Option(defaults.MAX_PARENTS, "--max-parents",
                                    help="parent-child: parents to return (1 to 1000)."),
    merge_threshold: float = typer.Option(defaults.MERGE_THRESHOLD, "--merge-threshold",
                                          help="auto-merge: merge when hit children / children >= this, in (0, 1]."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Assemble at most this many tokens of context."),
    filter_json: str = typer.Option(None, "--filter", help='Metadata containment filter, e.g. \'{"lang": "ja"}\'.'),
    lexical_weight: float = typer.Option(defaults.LEXICAL_WEIGHT, "--lexical-weight",
                                         help="Weight of lexical overlap in the score, in [0, 1] (0 = vector only)."),
    min_relative_score: float = typer.Option(None, "--min-relative-score",
                                             help="Drop hits below this share of the best hit's score, in (0, 1]."),
    model: str = typer.Option(None, "--model",
                              help="Embedding model (default: the one the collection recorded); another model than "
                                   "the collection's is refused."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Ask a question; print the contexts and why each was returned (expanded or merged).

    A collection that does not exist is an error naming the existing ones (exit 1).

    \b
    Examples:
        hrag query "How do I rotate the keys?" -c manuals
        hrag query "BYOD obligations" --mode auto-merge -c security
        hrag query "BYOD obligations" -c security --max-tokens 2000     (auto mode)
        hrag query "leave rules" --filter '{"lang": "en"}' --json
        hrag query -c tools -- "--track-origins: what does it show?"     (text starting with -)
    """
    from . import settings
    from .api import check_question

    chosen = _chosen_mode(mode, max_tokens)
    in_use = chosen if mode is not None else \
        f"{chosen} (the mode {'with --max-tokens' if max_tokens is not None else 'without --max-tokens'})"
    _refuse_options_of_other_modes(ctx, "--mode", chosen, in_use, {
        "max_parents": ("--max-parents", ("parent-child",)),
        "merge_threshold": ("--merge-threshold", ("auto-merge",)),
    })
    mode = chosen
    check_question(text)
    if top_k is not None:
        limits.check_count(top_k, "--top-k")
    limits.check_count(max_parents, "--max-parents")
    _check_fraction(merge_threshold, "--merge-threshold", zero_allowed=False)
    _check_fraction(lexical_weight, "--lexical-weight", zero_allowed=True)
    _check_fraction(min_relative_score, "--min-relative-score", zero_allowed=False)
    if max_tokens is not None:
        limits.check_count(max_tokens, "--max-tokens", maximum=limits.MAX_CONTEXT_TOKENS)
    filter_value = _parse_filter(filter_json)
    hrag = _open(model)
    _check_collection(hrag, collection)
    options: dict[str, Any] = {"collection": collection, "filter": filter_value, "lexical_weight": lexical_weight,
                               "min_relative_score": min_relative_score}
    given = {"top_k": top_k, "max_tokens": max_tokens, "max_parents": max_parents if mode == "parent-child" else None,
             "merge_threshold": merge_threshold if mode == "auto-merge" else None}
    options.update({name: value for name, value in given.items() if value is not None})
    context = hrag.context(text, settings.for_mode(mode, **options))
    if as_json:
        payload: dict[str, Any] = {"mode": mode, "results": [_result_json(r) for r in context.results]}
        if max_tokens is not None:
            payload["total_tokens"] = context.total_tokens
            payload["dropped"] = [_result_json(r) for r in context.dropped]
        print_json(payload)
        return
    print_results(context.results)
    if context.dropped:
        console.print(styled((f"dropped {len(context.dropped)} results over the {max_tokens}-token budget:",
                              "yellow"), " " + ", ".join(" › ".join(r.heading_path[-2:]) for r in context.dropped)))


def _parse_filter(filter_json: str | None) -> dict[str, Any] | None:
    if filter_json is None:
        return None
    try:
        value = json.loads(filter_json)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--filter is not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"--filter must be a JSON object, got a JSON {type(value).__name__}")
    return value


# ------------------------------------------------------------ show/delete/stats


@app.command("show")
@clear_errors
def show_cmd(
    node_id: str = typer.Argument(..., help="A node id (from `hrag query`)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show one node: where it sits in its tree, its children, and its full text.

    \b
    Examples:
        hrag show 0193c1d2-7a7e-7c3e-9f55-2f1e6a0b9c41
        hrag show 0193c1d2-7a7e-7c3e-9f55-2f1e6a0b9c41 --json
    """
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
    console.print(styled((" › ".join(node.heading_path), "bold cyan"),
                         f"  ({node.kind}, depth {node.depth}, {_plural(node.child_count, 'child', 'children')}, "
                         f"collection {node.collection})"))
    for c in children:
        console.print(f"  └ {c.id}  {c.kind}  {c.title or c.content[:60]!s}")
    console.print()
    console.print(full_text or "")


@app.command("delete")
@clear_errors
def delete_cmd(
    source: str = typer.Argument(..., help="The source (path as ingested) to delete."),
    collection: str = typer.Option("default", "--collection", "-c", help="Its collection."),
) -> None:
    """Delete a source and its whole tree (one transaction).

    \b
    Examples:
        hrag delete docs/old.md -c manuals
    """
    hrag = _open()
    if not hrag.delete(source, collection):
        elsewhere = hrag.repository.collections_of(source)
        where = (f"; it is stored in collection{'s' if len(elsewhere) > 1 else ''} "
                 + ", ".join(repr(c) for c in elsewhere) + " (pass --collection)") if elsewhere else \
            "; `hrag sources` lists what is stored"
        raise HragError(f"no source {source!r} in collection {collection!r}{where}")
    console.print(f"deleted {source}")


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
    if dry_run and not rename_from_paths:
        raise ValueError("--dry-run only goes with --rename-from-paths")
    for path in rename_from_paths or []:
        if not path.exists():
            raise ValueError(f"{path}: no such file or directory")
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
    _check_collection(hrag, collection)
    rows = hrag.sources(collection)
    models = hrag.collection_models(collection)
    if as_json:
        print_json([{**r.model_dump(mode="json", exclude={"metadata"}), "metadata": r.metadata,
                     "model": _model_json(models.get(r.collection))} for r in rows])
        return
    if not rows:
        console.print(styled(("no documents stored", "yellow")))
        return
    print_columns(["source", "collection", "nodes", "updated"],
                  [[r.source, r.collection, f"{r.nodes:,}", r.updated_at.strftime("%Y-%m-%d %H:%M:%S %Z")]
                   for r in rows], right={2})
    for name in sorted({r.collection for r in rows}):
        console.print(Text(f"collection {name}: model {_model_line(models.get(name))}"))


@app.command("stats")
@clear_errors
def stats_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Documents, nodes, embedded children and storage per collection.

    \b
    Examples:
        hrag stats
        hrag stats --json
    """
    hrag = _open()
    stats = hrag.repository.stats()
    if as_json:
        print_json(stats)
        return
    print_columns(["collection", "documents", "nodes", "embedded", "characters", "model"],
                  [[row["collection"], f"{row['documents']:,}", f"{row['nodes']:,}", f"{row['embedded']:,}",
                    f"{row['characters']:,}", row["model"]["model"] if row["model"] else "(not recorded)"]
                   for row in stats["collections"]], right={1, 2, 3, 4})
    console.print(f"embedding dimension {stats['embedding_dim']}, {stats['total_bytes'] / 1e6:.1f} MB on disk")


def _model_json(identity: Any) -> dict[str, Any] | None:
    from .collection_model import as_json

    return as_json(identity) if identity is not None else None


def _model_line(identity: Any) -> str:
    if identity is None:
        return "(not recorded: ingested before hrag-pg recorded models; the next ingest records it)"
    return str(identity.describe())


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
    hrag = _open()
    _check_collection(hrag, collection)
    if cancel:
        cancelled = hrag.cancel_reembed(collection)
        if as_json:
            print_json({"collection": collection, "cancelled": cancelled})
        else:
            console.print(Text(f"cancelled the unfinished reembed of {collection}" if cancelled
                               else f"no reembed of {collection} was under way"))
        return
    with _progress_bar() as bar:
        tasks: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task("re-embedding documents", total=total)
            bar.update(tasks[stage], completed=done, total=total)

        report = hrag.reembed(collection, model, progress=progress)
    if as_json:
        print_json(dataclasses.asdict(report))
        return
    if report.status == "unchanged":
        console.print(Text(f"collection {collection} is already embedded with {report.model}: nothing to do"))
        return
    console.print(Text(
        f"switched {collection} from {report.previous_model} to {report.model}: "
        f"{_plural(report.documents, 'document')} ({report.resumed:,} prepared by an earlier run), "
        f"{_plural(report.embedded, 'text')} embedded, {_plural(report.switched, 'node')} switched "
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
    import sqlalchemy as sa

    hrag = _open()
    try:
        fixed = hrag.repository.repair_integrity() if repair else {}
    except sa.exc.ProgrammingError as exc:
        reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
        raise HragError(f"--repair needs write access to hrag's tables ({reason}); run it as the owner, "
                        "or run `hrag check` without --repair") from None
    problems = hrag.repository.check_integrity()
    if as_json:
        print_json({"repaired": fixed, "problems": problems, "ok": not problems})
    else:
        for kind, count in fixed.items():
            if count:
                console.print(f"repaired {kind}: {count}")
        for p in problems:
            console.print(styled((str(p["problem"]), "red"), f" document {p['document_id'] or '-'} node "
                                 f"{p['node_id'] or '-'}: {p['detail']}"))
        console.print(styled(("all trees are consistent", "green")) if not problems
                      else _plural(len(problems), "problem"))
    if problems:
        raise typer.Exit(EXIT_FAILURE)


@app.command("eval")
@clear_errors
def eval_cmd(
    questions: Path = typer.Argument(..., help="The question file (JSON Lines, format above)."),
    mode: str | None = typer.Option(None, "--mode", "-m",
                                    help="parent-child, auto-merge or auto (the budget mode: --max-tokens, default "
                                         "2000). Default, as for query: auto with --max-tokens, else parent-child."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Assemble at most this many tokens per answer."),
    lexical_weight: float = typer.Option(None, "--lexical-weight",
                                         help="Weight of lexical overlap, in [0, 1] (0 = vector only)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Measure retrieval on your own questions: snippet recall, full recall, tokens, latency, per kind.

    The question file is JSON Lines, one object per line (blank lines ignored):

    \b
        {"id": "q1", "kind": "narrow", "question": "...", "evidence": ["verbatim snippet", "..."]}

    kind is narrow (one paragraph answers it) or broad (needs a whole section);
    evidence lists verbatim snippets of the stored text; ids are unique.

    \b
    Examples:
        hrag eval questions.jsonl -c manuals
        hrag eval questions.jsonl --mode auto-merge --max-tokens 2000 --json
        hrag eval questions.jsonl --max-tokens 1000        (auto mode)
    """
    from .evaluation import evaluate, load_questions

    mode = _chosen_mode(mode, max_tokens)
    if max_tokens is not None:
        limits.check_count(max_tokens, "--max-tokens", maximum=limits.MAX_CONTEXT_TOKENS)
    _check_fraction(lexical_weight, "--lexical-weight", zero_allowed=True)
    if not questions.is_file():
        raise ValueError(f"{questions}: no such file" if not questions.exists() else f"{questions}: not a file")
    try:
        loaded = load_questions(questions)
    except OSError as exc:
        raise ValueError(f"{questions}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{questions}: not UTF-8 text (byte offset {exc.start})") from None
    settings: dict[str, Any] = {"collection": collection}
    if lexical_weight is not None:
        settings["lexical_weight"] = lexical_weight
    hrag = _open()
    _check_collection(hrag, collection)
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

    \b
    Examples:
        hrag demo
        HRAG_DATA_DIR=/tmp/hrag-demo hrag demo --max-lines 5
    """
    from rich.rule import Rule

    from . import db, demo, embedded

    limits.check_count(max_lines, "--max-lines", maximum=1_000_000)
    console.print(Rule(styled(("hrag-pg demo", "bold"))))
    if not os.environ.get(db.ENV_URL):
        state = embedded.start()
        console.print(f"embedded PostgreSQL 18 + pgvector running in {state.data_dir}")
    hrag = _open()
    console.print(f"database {db.redact(hrag.url)} migrated to head")
    with _progress_bar() as bar:
        task = bar.add_task("ingesting examples", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"ingesting examples ({stage})", completed=done, total=total)

        reports = demo.ingest_examples(hrag, progress)
    for report in reports:
        for r in report.results:
            console.print(f"  {r.status:9} {Path(r.source).name} → collection {r.collection!r} "
                          f"({_plural(r.nodes, 'node')}, {r.embedded} embedded)")
    failures = 0
    for number, case in enumerate(demo.CASES, start=1):
        results, ok = demo.run_case(hrag, case)
        console.print()
        console.print(Rule(styled((f"{number}. {case.title}", "bold")), align="left"))
        console.print(styled((f"Q ({case.mode}, collection {case.collection}):", "bold"), f" {case.question}"))
        console.print(styled((f"expected: {case.expectation}", "dim")))
        if case.settings:
            settings = ", ".join(f"{k}={v}" for k, v in case.settings.items())
            console.print(styled((f"settings: {settings} — {case.why_settings}", "dim")))
        print_results(results[:3], max_lines=max_lines)
        console.print(styled(("✓ as expected", "bold green")) if ok else styled(("✗ not as expected", "bold red")))
        failures += not ok
    console.print()
    console.print(Rule())
    console.print(f"{len(demo.CASES) - failures} of {len(demo.CASES)} demo answers as expected. "
                  "Try: hrag query \"...\" --mode auto-merge --collection security")
    if failures:
        raise typer.Exit(EXIT_FAILURE)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:  # Ctrl-C outside a command (while typer sets up): still one line
        report_interrupt()
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
