"""``hrag serve``: one process keeps the model loaded and the connection pools open.

* :mod:`.service` — the server's state (the facade, the model loaded) and
  its operations: :mod:`hrag_pg.operations`' on an :class:`~hrag_pg.api.AsyncHRAG`,
  plus ingest and health; both transports call it.
* :mod:`.http` — the FastAPI JSON API (``/retrieve``, ``/sources``, ...;
  OpenAPI at ``/docs``), with the MCP server's streamable HTTP transport at ``/mcp``.
* :mod:`.mcp` — the MCP tools (``retrieve``, ``list_sources``, ``outline``,
  ``read_node``), over stdio (``hrag serve --mcp``) or HTTP.
* the CLI reaches a server through :mod:`hrag_pg.operations.remote`, which
  imports neither the facade nor the model (docs/serve.md).
"""

from __future__ import annotations

from ..operations.remote import ENV_TOKEN

#: Where ``hrag serve`` listens unless told otherwise (loopback: reads need no token).
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8740
#: Largest request body accepted, in bytes (``hrag serve --max-body-mb``).
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024

__all__ = ["DEFAULT_HOST", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_PORT", "ENV_TOKEN"]
