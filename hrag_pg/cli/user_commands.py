"""The commands a user runs: ingest, query, show, delete, sources, outline, stats, eval, demo."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.text import Text
from typer import _click as click  # typer vendors click: its exceptions and classes, not click's
from typer._click.core import ParameterSource

from .. import argument_limits, defaults
from . import core
from .core import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    MODEL_HELP,
    app,
    clear_errors,
    json_object,
    report_interrupt,
)
from .output import (
    console,
    err_console,
    mode_line,
    plural,
    print_columns,
    print_json,
    print_results,
    progress_bar,
    styled,
)

#: Exit statuses, the same for every command (README "Exit status").
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
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="List every skipped file (by default: one line per reason, counted)."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON report."),
) -> None:
    """Ingest documents: build their trees, embed the children, write each document in one transaction.

    Re-ingesting a changed file replaces its tree atomically and re-embeds only
    changed children; unchanged files are recognised from their content hash
    without loading the model. Unsupported and empty files found in a directory
    are skipped and counted, one line per reason (--verbose lists them); a file named explicitly must be supported, and
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
    from ..ingest.loaders import (
        STRATEGIES,
        file_type_of,
        iter_supported_files,
        nothing_to_ingest,
        skipped_summary,
        unsupported_reason,
    )
    from ..ingest.pipeline import IngestOptions

    if child == "qa":
        raise ValueError("--child qa needs a question generator, which only the Python API takes: "
                         "HRAG.ingest(paths, options=IngestOptions(child='qa'), question_generator=...)")
    argument_limits.check_count(max_child_tokens, "--max-child-tokens", maximum=argument_limits.MAX_CHUNK_TOKENS)
    argument_limits.check_nonnegative(overlap_tokens, "--overlap-tokens", maximum=argument_limits.MAX_CHUNK_TOKENS)
    if overlap_tokens >= max_child_tokens:
        raise ValueError(f"--overlap-tokens ({overlap_tokens}) must be less than --max-child-tokens "
                         f"({max_child_tokens}): the overlap is embedded with each piece")
    argument_limits.check_count(max_parent_tokens, "--max-parent-tokens", maximum=argument_limits.MAX_CHUNK_TOKENS)
    argument_limits.check_count(window_tokens, "--window-tokens", maximum=argument_limits.MAX_CHUNK_TOKENS)
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
    metadata = json_object(metadata_json, "--metadata")
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
                console.print(f"{result.status:9} {result.source}  ({plural(result.nodes, 'node')}, "
                              f"{result.embedded:,} embedded, {result.reused:,} reused)")
        else:
            failed.append((str(path), _in_cli_words(_without_path(str(path), error or ""))))
            if not as_json:
                err_console.print(styled(("failed", "red"), f"    {failed[-1][0]}: {failed[-1][1]}"), soft_wrap=True)

    hrag = None
    try:
        with progress_bar() as bar:
            opening = bar.add_task("opening the database", total=None)  # visible from the first second
            hrag = core.open_hrag(model)
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

            def on_model(name: str, why: str) -> None:
                if not as_json:  # (--json reports the model in its object)
                    console.print(styled((f"model {name}", "bold"), f": {why}"))

            report = hrag.writer.ingest(paths, collection=collection, options=options, progress=progress,
                                        force=force, bulk=bulk, metadata=metadata, source=source, on_file=on_file,
                                        replace=replace, on_done=on_done, on_model=on_model)
    except KeyboardInterrupt:
        stopped_in = now["path"]
        not_started = max(now["total"] - len(done) - len(failed) - (stopped_in is not None), 0)
        index_gone = bulk and hrag is not None and \
            hrag.administration.vector_index_state(default="valid") != "valid"
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
        lines = [f"{p}: {why}" for p, why in report.skipped] if verbose else skipped_summary(report.skipped)
        for line in lines:
            console.print(styled(("skipped", "yellow"), f"   {line}"))
        console.print(f"{plural(len(report.results), 'document')}, {plural(report.nodes, 'node')}, "
                      f"{plural(report.embedded, 'text')} embedded in {report.seconds:.1f}s"
                      + (f" (model {recorded.name})" if recorded else "")
                      + (f"; {plural(len(failed), 'file')} failed" if failed else ""))
    if report.failed:
        raise typer.Exit(EXIT_FAILURE)


def _in_cli_words(message: str) -> str:
    """A library message with the Python argument it suggests named as the CLI option instead."""
    return message.replace("errors='replace'", "--errors replace")


def _interrupted(done: list[Any], failed: list[tuple[str, str]], stopped_in: Path | None, not_started: int,
                 index_gone: bool) -> str:
    """What an interrupted ingest leaves: what was written (kept: one transaction per document) and what was not."""
    unchanged = sum(r.status == "unchanged" for r in done)
    parts = [f"{plural(len(done) - unchanged, 'document')} written"
             + (f" and {unchanged:,} unchanged" if unchanged else "") + " (kept)"]
    if failed:
        parts.append(f"{plural(len(failed), 'file')} failed")
    if stopped_in is not None:
        parts.append(f"{stopped_in} not written")
    parts.append(f"{plural(not_started, 'file')} not started")
    advice = "run the same command again to ingest the rest"
    if index_gone:
        advice += ("; the vector index was not rebuilt (searches scan every row): `hrag check --repair` "
                   "or the next `hrag ingest --bulk` builds it")
    return ", ".join(parts) + f"; {advice}"


# ------------------------------------------------------------------------ query


def _chosen_mode(mode: str | None) -> str:
    """``--mode`` as given, or the default query and eval share: the budget mode (auto)."""
    from ..settings import chosen_mode

    return chosen_mode(mode, option="--mode")


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


@app.command("query")
@clear_errors
def query_cmd(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The question."),
    mode: str | None = typer.Option(None, "--mode", "-m",
                             help="auto (the budget mode: the best context within --max-tokens, "
                                  f"{defaults.MAX_TOKENS:,} by default; the default mode), parent-child "
                                  "(small-to-big) or auto-merge."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    top_k: int = typer.Option(None, "--top-k", "-k",
                              help=f"Children to match (parent-child, default {defaults.TOP_K_CHILDREN}), "
                                   f"leaves to hit (auto-merge, {defaults.TOP_K}) or hits to select from "
                                   f"(auto, {defaults.AUTO_TOP_K}); 1 to 1000."),
    max_parents: int | None = typer.Option(None, "--max-parents",
                                           help=f"parent-child: parents to return, at most (1 to 1000; default "
                                                f"{defaults.MAX_PARENTS})."),
    merge_threshold: float | None = typer.Option(None, "--merge-threshold",
                                                 help="auto-merge: merge when hit children / children >= this, in "
                                                      f"(0, 1] (default {defaults.MERGE_THRESHOLD})."),
    max_tokens: int | None = typer.Option(None, "--max-tokens",
                                   help=f"Assemble at most this many tokens of context (the budget mode: "
                                        f"{defaults.MAX_TOKENS:,} unless given; the other modes: no bound)."),
    filter_json: str = typer.Option(None, "--filter", help='Metadata containment filter, e.g. \'{"lang": "ja"}\'.'),
    lexical_weight: float | None = typer.Option(None, "--lexical-weight",
                                                help="Weight of lexical overlap in the score, in [0, 1] (0 = vector "
                                                     f"only; default {defaults.LEXICAL_WEIGHT})."),
    min_relative_score: float = typer.Option(None, "--min-relative-score",
                                             help="Drop hits below this share of the best hit's score, in (0, 1] "
                                                  f"(parent-child and auto-merge: {defaults.MIN_RELATIVE_SCORE} "
                                                  "unless given)."),
    model: str = typer.Option(None, "--model",
                              help="Embedding model (default: the one the collection recorded); another model than "
                                   "the collection's is refused."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object for scripts."),
) -> None:
    """Ask a question; print the contexts and why each was returned (expanded or merged).

    A collection that does not exist is an error naming the existing ones (exit 1).

    \b
    Without --mode, the budget mode answers within --max-tokens (2,000 unless
    given) and the first line says so.

    \b
    Examples:
        hrag query "How do I rotate the keys?" -c manuals               (budget mode, 2,000 tokens)
        hrag query "BYOD obligations" --mode auto-merge -c security
        hrag query "BYOD obligations" -c security --max-tokens 500
        hrag query "leave rules" --filter '{"lang": "en"}' --json
        hrag query -c tools -- "--track-origins: what does it show?"     (text starting with -)
    """
    from ..operations.question import Question

    given = {"top_k": top_k, "max_parents": max_parents, "merge_threshold": merge_threshold,
             "lexical_weight": lexical_weight, "min_relative_score": min_relative_score}
    question = Question(text, mode=mode, max_tokens=max_tokens, collection=collection,
                        filter=json_object(filter_json, "--filter"),
                        settings={name: value for name, value in given.items() if value is not None})
    question.plan()  # (every value checked before a database or a server is reached)
    answer = core.reader(model).retrieve(question)
    if as_json:
        print_json(answer.model_dump(mode="json"))
        return
    console.print(styled((mode_line(answer.mode, answer.max_tokens, len(answer.results), answer.total_tokens),
                          "dim")))
    print_results(answer.results)
    if answer.dropped:
        console.print(styled((f"dropped {len(answer.dropped)} results over the {answer.max_tokens}-token budget:",
                              "yellow"), " " + ", ".join(" › ".join(r.heading_path[-2:]) for r in answer.dropped)))


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
    node = core.reader().node(node_id)
    if as_json:
        print_json(node.model_dump(mode="json"))
        return
    console.print(styled((" › ".join(node.heading_path) or node.source, "bold cyan"),
                         f"  ({node.kind}, depth {node.depth}, {node.token_count:,} tokens, "
                         f"{plural(node.child_count, 'child', 'children')}, collection {node.collection})"))
    for c in node.children:
        console.print(f"  └ {c.node_id}  {c.kind}  {c.title or c.lead}  ({c.token_count:,} tokens)")
    console.print()
    console.print(node.content)


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
    core.reader().delete(source, collection)
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
    if not rename_from_paths:
        _print_sources(core.reader().sources(collection), as_json)
        return
    hrag = core.open_hrag()
    if rename_from_paths:
        plans = hrag.writer.rename_from_paths(rename_from_paths, collection=collection or "default", dry_run=dry_run)
        if as_json:
            print_json([{"path": p.path, "old": p.old, "new": p.new, "status": p.status,
                         "embedded": p.embedded} for p in plans])
            return
        for p in plans:
            arrow = f"{p.old} → {p.new}" if p.old else p.new
            console.print(f"{p.status:9} {arrow}" + ("" if p.old else f"  ({p.path})"), highlight=False)
        return


def _print_sources(rows: list[Any], as_json: bool) -> None:
    """``hrag sources``' output from its entries (read here or answered by a server: printed the same)."""
    if as_json:
        print_json([r.model_dump(mode="json") for r in rows])
        return
    if not rows:
        console.print(styled(("no documents stored", "yellow")))
        return
    print_columns(["source", "collection", "nodes", "updated"],
                  [[r.source, r.collection, f"{r.nodes:,}", r.updated_at.strftime("%Y-%m-%d %H:%M:%S %Z")]
                   for r in rows], right={2})
    models = {r.collection: r.model for r in rows}
    for name in sorted(models):
        console.print(Text(f"collection {name}: model {_model_line(models[name])}"))


@app.command("outline")
@clear_errors
def outline_cmd(
    collection: str = typer.Option(None, "--collection", "-c", help="Only this collection."),
    source: str = typer.Option(None, "--source", help="Only this document (its source, as `hrag sources` lists it)."),
    max_depth: int = typer.Option(3, "--max-depth", help="Deepest level shown (0: the documents only; at most 100)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Show the heading tree of the stored documents, with each section's tokens and node id.

    Sections (and titled leaves such as functions) down to --max-depth, in
    document order; `hrag show ID` prints a node's children and full text.

    \b
    Examples:
        hrag outline -c manuals
        hrag outline --source handbook.md --max-depth 5
        hrag outline -c manuals --json
    """
    entries = core.reader().outline(collection=collection, source=source, max_depth=max_depth)
    if as_json:
        print_json([e.model_dump(mode="json") for e in entries])
        return
    if not entries:
        console.print(styled(("no documents stored", "yellow")))
        return
    print_columns(["node", "tokens", "children", "outline"],
                  [[str(e.node_id), f"{e.token_count:,}", str(e.child_count),
                    "  " * e.depth + (f"{e.source} ({e.collection})" if e.depth == 0 else e.title or f"({e.kind})")]
                   for e in entries], right={1, 2})
    console.print(Text("hrag show NODE prints a node's children and full text", style="dim"))


@app.command("stats")
@clear_errors
def stats_cmd(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Documents, nodes, embedded children and storage per collection.

    \b
    Examples:
        hrag stats
        hrag stats --json
    """

    stats = core.open_hrag().administration.stats()
    if as_json:
        print_json(stats.model_dump(mode="json"))
        return
    print_columns(["collection", "documents", "nodes", "embedded", "characters", "model"],
                  [[row.collection, f"{row.documents:,}", f"{row.nodes:,}", f"{row.embedded:,}",
                    f"{row.characters:,}", row.model["model"] if row.model else "(not recorded)"]
                   for row in stats.collections], right={1, 2, 3, 4})
    console.print(f"embedding dimension {stats.embedding_dim}, {stats.total_bytes / 1e6:.1f} MB on disk")


def _model_json(identity: Any) -> dict[str, Any] | None:
    from ..collection_model import as_json

    return as_json(identity) if identity is not None else None


def _model_line(model: dict[str, Any] | None) -> str:
    """A collection's recorded model (its ``--json`` record) as ``ModelIdentity.describe`` says it."""
    if model is None:
        return "(not recorded: ingested before hrag-pg recorded models; the next ingest records it)"
    return f"{model['model']} ({model['dimension']} dimensions, weights {model['fingerprint'] or 'unknown'})"


@app.command("eval")
@clear_errors
def eval_cmd(
    questions: Path = typer.Argument(..., help="The question file (JSON Lines, format above)."),
    mode: str | None = typer.Option(None, "--mode", "-m",
                                    help="parent-child, auto-merge or auto (the budget mode: --max-tokens, default "
                                         "2000). Default, as for query: auto with --max-tokens, else parent-child."),
    collection: str = typer.Option(None, "--collection", "-c", help="Search only this collection."),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Assemble at most this many tokens per answer."),
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
    from ..evaluation import evaluate, load_questions
    from ..settings import for_mode

    mode = _chosen_mode(mode)
    settings: dict[str, Any] = {"collection": collection}
    if lexical_weight is not None:
        settings["lexical_weight"] = lexical_weight
    for_mode(mode, **settings, **({"max_tokens": max_tokens} if max_tokens is not None else {}))  # (checked)
    if not questions.is_file():
        raise ValueError(f"{questions}: no such file" if not questions.exists() else f"{questions}: not a file")
    try:
        loaded = load_questions(questions)
    except OSError as exc:
        raise ValueError(f"{questions}: cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{questions}: not UTF-8 text (byte offset {exc.start})") from None
    hrag = core.open_hrag()
    hrag.reader.require_collection(collection)
    with progress_bar() as bar:
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

    from .. import db, demo, embedded_server

    argument_limits.check_count(max_lines, "--max-lines", maximum=1_000_000)
    console.print(Rule(styled(("hrag-pg demo", "bold"))))
    if not os.environ.get(db.ENV_URL):
        state = embedded_server.start()
        console.print(f"embedded PostgreSQL 18 + pgvector running in {state.data_dir}")
    hrag = core.open_hrag()
    console.print(f"database {db.redact(hrag.url)} migrated to head")
    with progress_bar() as bar:
        task = bar.add_task("ingesting examples", total=None)

        def progress(stage: str, done: int, total: int) -> None:
            bar.update(task, description=f"ingesting examples ({stage})", completed=done, total=total)

        reports = demo.ingest_examples(hrag, progress)
    for report in reports:
        for r in report.results:
            console.print(f"  {r.status:9} {Path(r.source).name} → collection {r.collection!r} "
                          f"({plural(r.nodes, 'node')}, {r.embedded} embedded)")
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
                  f"Try: {core.typed_command()} query \"...\" --mode auto-merge --collection security")
    if failures:
        raise typer.Exit(EXIT_FAILURE)
