"""Python source → module > class > function (the "code" strategy).

A question about a method is answered by the method (the child) and its
class (the parent): attributes, the docstring and sibling methods give the
context.  Text is stored once: a class node holds its source *without* its
methods (signature, docstring, class attributes); each method is a
"function" leaf with its full source, decorators and the comment lines right
above it included.  Module-level statements between definitions (imports,
constants) become "code" leaves, one per contiguous run of lines, so the
whole file is preserved.
"""

from __future__ import annotations

import ast

from hrag_pg.errors import IngestError
from hrag_pg.ingest._common import add_child, add_leaf
from hrag_pg.ingest.tree import DocumentTree, DraftNode

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


def _text(lines: list[str], start: int, end: int) -> str:
    return "\n".join(lines[start - 1 : end])


def _function_leaf(
    parent: DraftNode, node: ast.stmt, start: int, lines: list[str], name: str
) -> None:
    add_leaf(
        parent,
        "function",
        _text(lines, start, _end(node)),
        title=name,
        key=name,
        metadata={"lineno": start, "end_lineno": _end(node)},
    )


def _class_node(parent: DraftNode, node: ast.ClassDef, start: int, lines: list[str]) -> None:
    starts = _starts(node.body, lines, floor=node.lineno)
    methods = [
        (child, first) for child, first in zip(node.body, starts, strict=True) if isinstance(child, _DEFS)
    ]
    method_lines: set[int] = set()
    for method, first in methods:
        method_lines.update(range(first, _end(method) + 1))
    own = [lines[n - 1] for n in range(start, _end(node) + 1) if n not in method_lines]
    klass = add_child(
        parent,
        DraftNode(
            kind="class",
            content="\n".join(own).rstrip(),
            title=node.name,
            key=node.name,
            metadata={"lineno": start, "end_lineno": _end(node)},
        ),
    )
    for method, first in methods:
        _function_leaf(klass, method, first, lines, f"{node.name}.{method.name}")


def parse_python(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Build a module > class > function tree with :mod:`ast`.

    Raises :class:`IngestError` naming the file and line on a syntax error.
    """
    try:
        module = ast.parse(text, filename=source)
    except SyntaxError as exc:
        raise IngestError(f"{source}: Python syntax error at line {exc.lineno}: {exc.msg}") from exc
    lines = text.splitlines()
    root = DraftNode(kind="document", content="", title=title or source.rsplit("/", 1)[-1])
    run: list[int] = []  # first and last line of the current run of module-level statements

    def flush(last: int) -> None:
        if run:
            add_leaf(
                root,
                "code",
                _text(lines, run[0], last),
                metadata={"lineno": run[0], "end_lineno": last},
            )
            run.clear()

    body = list(module.body)
    covered = 0  # last line already assigned to a node
    if body and _is_docstring(body[0]):
        docstring = body.pop(0)
        add_leaf(
            root,
            "paragraph",
            _text(lines, 1, _end(docstring)),
            key="__doc__",
            metadata={"docstring": True},
        )
        covered = _end(docstring)
    for node, start in zip(body, _starts(body, lines, covered), strict=True):
        if not run:
            run.append(covered + 1)  # comments and blank lines since the last node join the run
        if isinstance(node, (*_DEFS, ast.ClassDef)):
            flush(start - 1)
            if isinstance(node, ast.ClassDef):
                _class_node(root, node, start, lines)
            else:
                _function_leaf(root, node, start, lines, node.name)
        covered = _end(node)
    if not run:
        run.append(covered + 1)
    flush(len(lines))
    metadata = {"strategy": "code", "language": "python"}
    return DocumentTree(source=source, root=root, title=root.title, metadata=metadata)


__all__ = ["parse_python"]
