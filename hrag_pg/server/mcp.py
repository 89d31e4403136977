"""The MCP tools: retrieve, list_sources, outline, read_node (the official ``mcp`` SDK's ``MCPServer``).

The same server object answers over stdio (``hrag serve --mcp``: an MCP
client starts it as a subprocess) and over streamable HTTP (mounted at
``/mcp`` in the HTTP app).  Results are compact text an LLM reads well:
each passage with its source, heading path, node id and token count, then
its content.  The tools are read-only; writes go through the HTTP API with
its token.  (``MCPServer`` is what mcp 1.x called ``FastMCP``.)
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..errors import HragError
from ..models import OutlineEntry
from ..operations.question import Question
from ..operations.shapes import Answer, NodeView, SourceEntry
from .service import Service

P = ParamSpec("P")
R = TypeVar("R")

INSTRUCTIONS = """\
hrag-pg retrieves passages of the documents stored in a PostgreSQL database, organised as trees
(document > chapter > section > paragraph). Use `retrieve` to answer a question from the documents:
it returns the best non-overlapping passages within a token budget, each with its source, heading
path and node id. To browse instead: `list_sources` shows which documents (and collections) exist,
`outline` shows a document's table of contents with node ids, and `read_node` returns one node's
full text and its children's ids. A typical chain: list_sources -> outline -> read_node, or
retrieve -> read_node (to widen a passage to its whole section) -> retrieve (a follow-up question)."""

RETRIEVE = """\
Search the stored documents for passages that answer `question`, and return the best context
within `max_tokens` tokens (default 2000): small passages for a narrow question, whole sections
when many of their parts match. Use it first for any question about the documents' content.
Each passage comes with its source (document), heading path, node id, token count and text; pass
a node id to `read_node` for the whole surrounding section. `collection` limits the search to
one collection (see `list_sources`); `filter` is a JSON object the documents' metadata must
contain, e.g. {"lang": "en"}. `mode` is "auto" (default: the budget decides what to merge),
"parent-child" (whole parents of the best-matching paragraphs) or "auto-merge"."""

LIST_SOURCES = """\
List the stored documents: for each collection, its documents' source names, node counts and
when they were last updated. Use it to learn what can be searched and the exact collection and
source names that `retrieve`, `outline` and `read_node` take."""

OUTLINE = """\
Show the table of contents of the stored documents (or of one collection, or one `source`):
each heading as an indented line with its node id, kind and token count, down to `max_depth`
levels (default 3). Use it to find the section that covers a topic, then `read_node` with that
node id for its full text."""

READ_NODE = """\
Read one node (a document, chapter, section or paragraph) by its node id, as given by `retrieve`
or `outline`: its heading path, kind, its children (id, kind, and title or the start of its text)
and its full text (its own text plus all of its descendants'). Use it to widen a passage `retrieve`
found to its whole section, or to read a section picked from `outline`."""


def _tool_errors(func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """hrag's own messages (bad argument, unknown collection or node) reach the model as the tool's error."""

    @functools.wraps(func)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await func(*args, **kwargs)
        except (HragError, ValueError) as exc:
            raise ToolError(" ".join(str(exc).split())) from exc

    return wrapper


def format_retrieval(answer: Answer) -> str:
    """The passages of an answer as text: one header line each, then the content."""
    results = answer.results
    budget = f", {answer.total_tokens} of {answer.max_tokens} tokens" if answer.max_tokens is not None else ""
    lines = [f"{len(results)} passage{'s' if len(results) != 1 else ''} (mode {answer.mode}{budget})"]
    if not results:
        lines.append("No passage matched; try other words, another collection, or list_sources.")
    for r in results:
        path = " › ".join(p for p in r.heading_path if p) or (r.title or "")
        lines += ["", f"[{r.rank}] source: {r.source} | {path} | node {r.node_id} | "
                      f"{r.token_count} tokens | score {r.score:.3f}", r.content]
    if answer.dropped:
        lines += ["", "Over the budget (not included): " + "; ".join(
            f"{' › '.join(d.heading_path[-2:])} (node {d.node_id}, {d.token_count} tokens)" for d in answer.dropped)]
    return "\n".join(lines)


def format_sources(rows: list[SourceEntry]) -> str:
    if not rows:
        return "No documents are stored."
    lines: list[str] = []
    for collection in sorted({r.collection for r in rows}):
        members = [r for r in rows if r.collection == collection]
        lines.append(f"collection {collection} ({len(members)} document{'s' if len(members) != 1 else ''}):")
        lines += [f"- {r.source} ({r.nodes} nodes, updated {r.updated_at.isoformat()[:19]})" for r in members]
    return "\n".join(lines)


def format_outline(entries: list[OutlineEntry]) -> str:
    if not entries:
        return "Nothing to outline: no documents match."
    lines: list[str] = []
    for e in entries:
        if e.depth == 0:
            lines.append(f"{e.source} (collection {e.collection}) node {e.node_id}, {e.token_count} tokens")
            continue
        title = e.title or (e.heading_path[-1] if e.heading_path else e.kind)
        lines.append(f"{'  ' * e.depth}- {title} [{e.kind}, node {e.node_id}, {e.token_count} tokens"
                     + (f", {e.child_count} children" if e.child_count else "") + "]")
    return "\n".join(lines)


def format_node(node: NodeView) -> str:
    path = " › ".join(p for p in node.heading_path if p) or (node.title or "")
    lines = [f"node {node.node_id}: {path}",
             f"kind {node.kind}, depth {node.depth}, collection {node.collection}, {node.token_count} tokens"
             + (f", parent {node.parent_id}" if node.parent_id else "")]
    if node.children:
        lines.append(f"children ({len(node.children)}):")
        lines += [f"- {c.node_id} {c.kind} {c.title or c.lead} ({c.token_count} tokens)" for c in node.children]
    else:
        lines.append("children: none")
    lines += ["", "full text:", node.content]
    return "\n".join(lines)


Collection = Annotated[str | None, Field(description="Only this collection (a name from list_sources).")]


def build_mcp(service: Callable[[], Service]) -> MCPServer[Any]:
    """The MCP server; ``service()`` gives the running server's :class:`Service` when a tool is called."""
    from .. import __version__

    server: MCPServer[Any] = MCPServer("hrag-pg", instructions=INSTRUCTIONS, version=__version__)

    @server.tool(description=RETRIEVE)
    @_tool_errors
    async def retrieve(
        question: Annotated[str, Field(description="The question, in the documents' language if you can.")],
        max_tokens: Annotated[int, Field(description="Token budget of the context returned (1 to 100000).")] = 2000,
        collection: Collection = None,
        filter: Annotated[dict[str, Any] | None,
                          Field(description='Metadata the documents must contain, e.g. {"lang": "en"}.')] = None,
        mode: Annotated[Literal["auto", "parent-child", "auto-merge"],
                        Field(description="auto (default), parent-child or auto-merge.")] = "auto",
    ) -> str:
        return format_retrieval(await service().retrieve(
            Question(question, mode=mode, max_tokens=max_tokens, collection=collection, filter=filter)))

    @server.tool(description=LIST_SOURCES)
    @_tool_errors
    async def list_sources(collection: Collection = None) -> str:
        return format_sources(await service().sources(collection))

    @server.tool(description=OUTLINE)
    @_tool_errors
    async def outline(
        collection: Collection = None,
        source: Annotated[str | None, Field(description="Only this document (a source from list_sources).")] = None,
        max_depth: Annotated[int, Field(description="Levels below each document to show (0 to 100).")] = 3,
    ) -> str:
        return format_outline(await service().outline(collection=collection, source=source, max_depth=max_depth))

    @server.tool(description=READ_NODE)
    @_tool_errors
    async def read_node(
        node_id: Annotated[str, Field(description="A node id (UUID) from retrieve or outline.")],
    ) -> str:
        return format_node(await service().node(node_id))

    return server


async def run_stdio(open_service: Callable[[], Awaitable[Service]]) -> None:
    """Serve the tools on stdin/stdout until the client closes them (``hrag serve --mcp``)."""
    running = await open_service()
    try:
        await build_mcp(lambda: running).run_stdio_async()
    finally:
        await running.close()
