"""The ``hrag`` application: its root command, how failures end, and what every command shares.

Every command honours ``HRAG_DATABASE_URL`` (any PostgreSQL with pgvector)
and ``HRAG_DATA_DIR`` (where the embedded server keeps its data).  Errors are
one line on stderr and a non-zero exit status; ``--json`` prints one JSON
object for scripts.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer import _click as click  # typer vendors click: its exceptions and classes, not click's
from typer._click import exceptions as click_exceptions
from typer._click.core import ParameterSource
from typer._click.globals import get_current_context as current_context
from typer.core import TyperArgument, TyperGroup

from .. import __version__, argument_limits
from ..errors import HragError, ServerUnavailable, UnknownSetting
from .output import closed_pipe, err_console, error_line, print_json

#: Exit statuses, the same for every command (docs/cli.md, "Exit status").
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
        except BrokenPipeError:  # (--json's writes: the reader of stdout closed it)
            closed_pipe()
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

F = TypeVar("F", bound=Callable[..., Any])


def clear_errors(func: F) -> F:
    """HragError: one line, exit 1 (3 for a server that cannot be reached); ValueError (bad arguments): one
    line, exit 2; Ctrl-C: exit 130.

    With ``--json`` the error is also printed as JSON on stdout, ``{"error": "..."}``,
    so that a script reading stdout gets valid JSON whatever the outcome.
    """

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return func(*args, **kwargs)
        except ValueError as exc:  # includes InvalidArgument: the caller's values are out of range
            _fail(in_option_words(exc), as_json)
            raise typer.Exit(EXIT_USAGE) from None
        except HragError as exc:
            _fail(in_option_words(exc), as_json)
            raise typer.Exit(EXIT_NOT_RUNNING if isinstance(exc, ServerUnavailable) else EXIT_FAILURE) from None
        except KeyboardInterrupt:
            report_interrupt()
            if as_json:
                print_json({"error": "interrupted"})
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


#: Settings whose option is not ``--`` plus their name with dashes.
_FIELD_OPTIONS = {"top_k_children": "--top-k"}


def _option_of(field: str | None) -> str | None:
    """The running command's option for an operation's argument (``top_k`` -> ``--top-k``), if it has one."""
    ctx = current_context(silent=True)
    if field is None or ctx is None:
        return None
    option = _FIELD_OPTIONS.get(field, "--" + field.replace("_", "-"))
    return option if any(option in getattr(p, "opts", ()) for p in ctx.command.params) else None


def in_option_words(exc: Exception) -> str:
    """An operation's message about an argument, in the words of the command's option.

    The operations check their arguments once and name them as Python and
    JSON do (``top_k must be between 1 and 1000``); a user of the command
    typed ``--top-k``, so that is the name they read.
    """
    message = str(exc)
    field = getattr(exc, "field", None)
    option = _option_of(field)
    if option is None or field is None:
        return message
    if isinstance(exc, UnknownSetting):
        ctx = current_context()
        given = ctx.get_parameter_source("mode") is ParameterSource.COMMANDLINE
        in_use = exc.mode if given else f"{exc.mode} (the default mode)"
        return (f"{option} applies to --mode {' or '.join(exc.taken_by)} only, not {in_use}; "
                f"drop {option} or pass --mode {exc.taken_by[0]}") if exc.taken_by else message
    return option + message[len(field):] if message.startswith(field + " ") else message


def _fail(message: str, as_json: bool) -> None:
    error_line(message)
    if as_json:
        print_json({"error": " ".join(message.split("\n")).strip()})


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


# ----------------------------------------------------------------- shared bits


#: ``--model``'s help, shared by the commands that embed.
MODEL_HELP = ("Embedding model: all-MiniLM-L6-v2 (minilm), multilingual-e5-small-q4 (e5), or a sentence-transformers "
              "name or folder. Default: HRAG_EMBEDDING_MODEL, else the model the collection recorded, else for a new "
              "collection by the script of its first documents (Japanese, Chinese, Korean: e5; otherwise MiniLM).")


def open_hrag(model: str | None = None) -> Any:
    """The facade on HRAG_DATABASE_URL or the embedded server (migrated to head if behind).

    An upgrade of a schema that was installed is said in one line on stderr: an operator who
    rolled back with ``hrag migrate REV`` must not have it undone unseen.
    """
    from .. import migrate
    from ..api import HRAG

    if model is not None and not model.strip():
        raise ValueError("--model must not be empty")
    hrag = HRAG.open(model=model)
    if hrag.upgraded_from is not None:
        err_console.print(f"note: upgraded the hrag schema from revision {hrag.upgraded_from} to "
                          f"{migrate.head_revision()}, which this hrag-pg needs")
    return hrag


def json_object(text: str | None, option: str) -> dict[str, Any] | None:
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


def check_fraction(value: float | None, option: str, *, zero_allowed: bool) -> None:
    if value is not None:
        argument_limits.check_fraction(value, option, zero_allowed=zero_allowed)


def typed_command() -> str:
    """How the user's shell runs this hrag, for hints: ``hrag`` when PATH finds this very one, else its path
    (after ``make demo``: ``.venv/bin/hrag``), else ``python -m hrag_pg``."""
    import shutil

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if script is None or script.name != "hrag" or not script.exists():
        return f"{shlex.quote(sys.executable)} -m hrag_pg"
    found = shutil.which("hrag")
    if found is not None and Path(found).resolve() == script.resolve():
        return "hrag"
    try:
        return shlex.quote(str(script.resolve().relative_to(Path.cwd().resolve())))
    except ValueError:
        return shlex.quote(str(script.resolve()))


def reader(model: str | None = None) -> Any:
    """The reading operations: through the server at ``HRAG_SERVER_URL`` when it is set, else in-process.

    Either answers in the same shapes, so a command prints the same whichever
    way it asked.  ``--model`` cannot go through a server: it embeds with its own.
    """
    from ..operations import remote

    if remote.server_url() is None:
        return open_hrag(model).reader
    if model is not None:
        raise ValueError(f"--model cannot be used through a server ({remote.ENV_SERVER_URL} is set): the server "
                         f"embeds with its own model; unset {remote.ENV_SERVER_URL} to use --model")
    return remote.RemoteReader()
