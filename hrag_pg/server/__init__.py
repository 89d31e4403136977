"""``hrag serve``: one process keeps the model loaded and the connection pools open.

* :mod:`.service` — what the server does (retrieve, sources, nodes, ingest,
  delete, health) on an :class:`~hrag_pg.api.AsyncHRAG`, with the CLI's
  checks and messages; both front ends call it.
* :mod:`.http` — the FastAPI JSON API (``/retrieve``, ``/sources``, ...;
  OpenAPI at ``/docs``), with the MCP server's streamable HTTP transport at ``/mcp``.
* :mod:`.mcp` — the MCP tools (``retrieve``, ``list_sources``, ``outline``,
  ``read_node``), over stdio (``hrag serve --mcp``) or HTTP.
* :mod:`.client` — what the CLI uses when ``HRAG_SERVER_URL`` is set; it
  imports neither the facade nor the model (docs/serve.md).
"""

from __future__ import annotations

#: Where ``hrag serve`` listens unless told otherwise (loopback: reads need no token).
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8740
#: The bearer token writes need (POST/DELETE /documents); unset, writes are refused.
ENV_TOKEN = "HRAG_SERVER_TOKEN"
#: Largest request body accepted, in bytes (``hrag serve --max-body-mb``).
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
