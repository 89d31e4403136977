"""Strings → trees: the file readers' parsing for text that never was a file.

Applications that already hold their documents in memory (a CMS, a
LangChain/LlamaIndex ``Document``, a web scraper) ingest them with
``HRAG.ingest_text``; the text goes through the same parsers as a file of
that format, so the same text yields the same tree, ids and hashes whether it
came from a file or a string.  Bad input (not a string, empty, NUL bytes,
metadata that is not a JSON object) raises :class:`IngestError` naming the
source, before anything reaches the database.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from hrag_pg.errors import IngestError
from hrag_pg.ingest.clauses import looks_like_clauses, parse_clauses
from hrag_pg.ingest.code import parse_python
from hrag_pg.ingest.html import parse_html
from hrag_pg.ingest.loaders import STRATEGIES
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pages import parse_pages_text
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tree import DocumentTree
from hrag_pg.ingest.tree_helpers import has_leaf_text
from hrag_pg.ingest.window import parse_window

TextFormat = Literal["markdown", "text", "html", "rst"]
#: ``text`` reads like a ``.txt`` file does (Markdown headings if any, else lines standing
#: alone as headings, see :mod:`hrag_pg.ingest.plaintext`);
#: ``rst`` like a ``.rst`` file (reStructuredText section titles).
FORMATS: tuple[str, ...] = ("markdown", "text", "html", "rst")


def check_metadata(metadata: Any, source: str) -> dict[str, Any]:
    """A copy of ``metadata`` if it is a JSON object PostgreSQL's jsonb can store, else IngestError."""
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise IngestError(
            f"{source}: metadata must be a dict (a JSON object), got {type(metadata).__name__}"
        )
    for key in metadata:
        if not isinstance(key, str):
            raise IngestError(f"{source}: metadata keys must be strings, got {key!r} ({type(key).__name__})")

    def reject(value: Any) -> Any:
        raise TypeError(f"{type(value).__name__} value {value!r:.60}")

    try:
        encoded = json.dumps(dict(metadata), ensure_ascii=False, allow_nan=False, default=reject)
    except (TypeError, ValueError) as exc:
        reason = str(exc) if isinstance(exc, TypeError) else "NaN or infinity (not valid JSON)"
        raise IngestError(f"{source}: metadata is not JSON-serialisable: {reason}") from None
    if "\\u0000" in encoded:
        raise IngestError(f"{source}: metadata contains a NUL character, which PostgreSQL jsonb cannot store")
    decoded: dict[str, Any] = json.loads(encoded)
    return decoded


def check_text(text: Any, source: str) -> str:
    """The text with its BOM dropped and newlines normalised, or IngestError naming the problem."""
    if not isinstance(text, str):
        raise IngestError(f"{source}: the text must be a str, got {type(text).__name__}")
    offset = text.find("\x00")
    if offset >= 0:
        raise IngestError(
            f"{source}: the text contains a NUL character at offset {offset}; PostgreSQL text cannot store it"
        )
    normalised: str = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not normalised.strip():
        raise IngestError(f"{source}: the text is empty (or only whitespace); nothing to ingest")
    return normalised


def check_source(source: Any) -> str:
    if not isinstance(source, str) or not source.strip():
        raise IngestError(f"a text needs a non-empty source name (a str), got {source!r:.60}")
    return source


def load_text(
    text: str,
    *,
    source: str,
    format: TextFormat = "markdown",
    strategy: str | None = None,
    window_tokens: int = 1200,
) -> DocumentTree:
    """Parse a string into a :class:`DocumentTree`, exactly as a file of ``format`` would be."""
    source = check_source(source)
    text = check_text(text, source)
    if format not in FORMATS:
        raise IngestError(f"{source}: unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    if strategy is not None and strategy not in STRATEGIES:
        raise IngestError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    tree: DocumentTree
    if format == "html" and strategy in (None, "headings"):
        tree, strategy = parse_html(text, source), "headings"
    elif format == "rst" and strategy in (None, "headings"):
        tree, strategy = parse_rst(text, source), "headings"
    elif strategy == "code":
        tree = parse_python(text, source)
    else:
        if format == "html":
            text = parse_html(text, source).root.full_text()
        if strategy is None:
            strategy = "clauses" if looks_like_clauses(text) else "headings"
        parsers: dict[str, Callable[..., DocumentTree]] = {
            "headings": functools.partial(parse_markdown, plain_headings=format == "text"),
            "clauses": parse_clauses,
            "pages": parse_pages_text,
            "window": functools.partial(parse_window, parent_tokens=window_tokens),
        }
        tree = parsers[strategy](text, source)
    if not has_leaf_text(tree.root):
        raise IngestError(f"{source}: the {strategy} strategy found no text blocks in it; nothing to ingest")
    tree.metadata.update({"strategy": strategy, "file_type": "markdown" if format == "text" else format})
    return tree

