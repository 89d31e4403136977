"""Python source → module > class > function (the "code" strategy).

A question about a method is answered by the method (the child) and its
class (the parent): attributes, the docstring and sibling methods give the
context.  Text is stored once and in order: a class node holds its source up
to its first method or nested class (decorators, signature, docstring, the
attributes defined first); each method is a "function" leaf with its full
source, decorators and the comment lines right above it included; any
other statements of the class body after that (attributes defined between
or after methods) become "code" leaves in their place.  Module-level
statements between definitions (imports, constants) become "code" leaves,
one per contiguous run of lines.  Separators keep the blank lines between
all of these, so the root's full text is the file.
"""

from __future__ import annotations

import ast
from typing import Any

from hrag_pg.errors import IngestError
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import TextCursor, add_child, normalise_text

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _start(node: ast.stmt, lines: list[str], floor: int) -> int:
    """First line (1-based) of a statement with its decorators and the comment
    lines directly above it, never reaching line ``floor`` (the previous
    statement's last line)."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    if isinstance(node, (*_DEFS, ast.ClassDef)):
        while start - 1 > floor and lines[start - 2].lstrip().startswith("#"):
            start -= 1
    return start


def _starts(body: list[ast.stmt], lines: list[str], floor: int) -> list[int]:
    """Start line of each statement in ``body``; ``floor`` is the line before the first."""
    starts = []
    for node in body:
        starts.append(_start(node, lines, floor))
        floor = _end(node)
    return starts


def _end(node: ast.stmt) -> int:
    return node.end_lineno or node.lineno


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _leaf(cursor: TextCursor, parent: DraftNode, first: int, last: int, kind: str,
          **fields: Any) -> DraftNode | None:
    """A leaf holding lines ``first``..``last`` (1-based, inclusive), unless they are blank."""
    if last < first:
        return None
    return cursor.leaf(parent, *cursor.lines_span(first - 1, last), kind, **fields)


def _body(cursor: TextCursor, lines: list[str], parent: DraftNode, body: list[ast.stmt], first: int,
          last: int, prefix: str) -> None:
    """Nodes for the statements ``body`` occupying lines ``first``..``last``, in order.

    Functions become "function" leaves, classes "class" nodes; each run of
    other lines between them (statements, comments) becomes one "code" leaf.
    """
    run = first  # first line not yet in a node
    for node, start in zip(body, _starts(body, lines, first - 1), strict=True):
        if not isinstance(node, (*_DEFS, ast.ClassDef)) or start < run:
            continue
        _leaf(cursor, parent, run, start - 1, "code", metadata={"lineno": run, "end_lineno": start - 1})
        name = f"{prefix}{node.name}"
        if isinstance(node, ast.ClassDef):
            _class_node(cursor, parent, node, start, lines, name)
        else:
            _leaf(cursor, parent, start, _end(node), "function", title=name, key=name,
                  metadata={"lineno": start, "end_lineno": _end(node)})
        run = _end(node) + 1
    _leaf(cursor, parent, run, last, "code", metadata={"lineno": run, "end_lineno": last})


def _class_node(cursor: TextCursor, parent: DraftNode, node: ast.ClassDef, start: int, lines: list[str],
                name: str) -> None:
    """The class's own lines up to its first method (or nested class), then the rest of its body."""
    starts = _starts(node.body, lines, floor=node.lineno)
    split = next((i for i, child in enumerate(node.body) if isinstance(child, (*_DEFS, ast.ClassDef))),
                 len(node.body))
    own_last = starts[split] - 1 if split < len(node.body) else _end(node)
    klass = cursor.node(*cursor.lines_span(start - 1, own_last), "class", title=name, key=node.name,
                        metadata={"lineno": start, "end_lineno": _end(node)})
    assert klass is not None  # the "class" line is never blank
    add_child(parent, klass)
    if split < len(node.body):
        _body(cursor, lines, klass, node.body[split:], starts[split], _end(node), f"{name}.")


def parse_python(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Build a module > class > function tree with :mod:`ast`.

    Raises :class:`IngestError` naming the file and line on a syntax error.
    """
    text = normalise_text(text)
    try:
        module = ast.parse(text, filename=source)
    except SyntaxError as exc:
        raise IngestError(f"{source}: Python syntax error at line {exc.lineno}: {exc.msg}") from exc
    cursor = TextCursor(text)
    lines = text.split("\n")
    root = DraftNode(kind="document", content="", title=title or source.rsplit("/", 1)[-1])
    body = list(module.body)
    covered = 0  # last line already in a node
    if body and _is_docstring(body[0]):
        docstring = body.pop(0)
        _leaf(cursor, root, 1, _end(docstring), "paragraph", key="__doc__", metadata={"docstring": True})
        covered = _end(docstring)
    _body(cursor, lines, root, body, covered + 1, len(lines), "")
    metadata = {"strategy": "code", "language": "python"}
    return DocumentTree(source=source, root=root, title=root.title, metadata=metadata)


__all__ = ["parse_python"]
