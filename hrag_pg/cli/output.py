"""What the CLI prints: one console each for stdout and stderr, results, tables, JSON, progress."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Container, Sequence
from typing import Any, NoReturn

from rich.console import Console
from rich.text import Text


def closed_pipe() -> NoReturn:
    """Stop quietly, status 0: whoever reads stdout has closed it (``hrag outline | head -1``), which is
    not an error.  Later writes (the interpreter's flush at exit) go nowhere instead of failing again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(0)


class _Console(Console):
    def on_broken_pipe(self) -> None:  # (rich's own ends with status 1)
        closed_pipe()


#: Markup off everywhere: stored text, names and paths print literally; styles come from Text.
#: soft_wrap: long lines (paths, errors) are never cut at the terminal's width, so they stay greppable.
console = _Console(markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


def error_line(message: str) -> None:
    """One line on stderr: never wrapped, never markup, no blank line before it."""
    one_line = " ".join(str(message).split("\n")).strip()
    err_console.print(Text.assemble(("error:", "bold red"), " ", one_line), soft_wrap=True)


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


def plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (plural or word + 's')}"


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


#: How the first line of ``hrag query`` names each mode.
MODE_NAMES = {"auto": "budget mode (auto)", "parent-child": "parent-child", "auto-merge": "auto-merge"}


def mode_line(mode: str, max_tokens: int | None, passages: int, tokens: int) -> str:
    """What answered: the mode, its budget if it has one, and what came back (``hrag query``'s first line)."""
    budget = f", {max_tokens:,}-token budget" if max_tokens is not None else ""
    unit = "passage" if passages == 1 else "passages"
    return f"{MODE_NAMES.get(mode, mode)}{budget}: {passages} {unit}, {tokens:,} tokens"


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


def progress_bar() -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    # Only on a terminal: redirected, a transient bar would leave a blank line on stderr.  What
    # a command prints meanwhile goes above the bar; stdout only when it is that terminal too
    # (redirected, stdout must stay in its file, not be drawn on the bar's stderr).
    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=True, disable=not err_console.is_terminal,
                    redirect_stdout=console.is_terminal)
