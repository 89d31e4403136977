"""The ``hrag`` program: the command line (:mod:`hrag_pg.cli`) and ``hrag serve``, which starts the
server (:mod:`hrag_pg.server`).

The one module that knows both: the command line never imports the server
(it reaches a running one through :mod:`hrag_pg.operations.remote`), and the
server never imports the command line.
"""

from __future__ import annotations

import os

import typer
from rich.text import Text

from . import cli, server
from .cli import core
from .cli.core import app, clear_errors
from .cli.output import console
from .server import run


@app.command("serve")
@clear_errors
def serve_cmd(
    host: str = typer.Option(server.DEFAULT_HOST, "--host",
                             help="Address to listen on (loopback by default; reads need no token, so think twice "
                                  "before 0.0.0.0)."),
    port: int = typer.Option(server.DEFAULT_PORT, "--port", help="TCP port of the HTTP API."),
    mcp_stdio: bool = typer.Option(False, "--mcp",
                                   help="Serve the MCP tools on stdin/stdout instead (what an MCP client starts)."),
    model: str = typer.Option(None, "--model", help=core.MODEL_HELP),
    max_body_mb: float = typer.Option(10.0, "--max-body-mb", help="Largest request body accepted, in MB."),
) -> None:
    """Serve retrieval over HTTP (JSON API, OpenAPI at /docs, MCP at /mcp, the inspector page at /), keeping the
    model loaded.

    One process keeps the embedding model in memory and the database connections
    open, so a question costs only the search. Reads are open; writes
    (POST/DELETE /documents) need the header 'Authorization: Bearer $HRAG_SERVER_TOKEN',
    and are refused while HRAG_SERVER_TOKEN is unset. With HRAG_SERVER_URL set
    (e.g. http://127.0.0.1:8740), `hrag query`, `hrag sources`, `hrag outline` and `hrag show` ask the server.
    SIGTERM or Ctrl-C finishes the requests under way, then stops. See docs/serve.md.

    \b
    Examples:
        hrag serve
        HRAG_SERVER_TOKEN=$(openssl rand -hex 24) hrag serve --port 9000
        hrag serve --mcp                      (for an MCP client's config)
    """
    run.check_serve_extra()
    if not 1 <= port <= 65535:
        raise ValueError(f"--port must be between 1 and 65535, got {port}")
    if not 0 < max_body_mb <= 10_000:
        raise ValueError(f"--max-body-mb must be in (0, 10000], got {max_body_mb}")
    hrag = core.open_hrag(model)
    if mcp_stdio:
        run.serve_mcp_stdio(hrag)
        return
    run.serve_http(hrag, host=host, port=port, token=os.environ.get(server.ENV_TOKEN, ""),
                   max_body_bytes=int(max_body_mb * 1024 * 1024), announce=lambda line: console.print(Text(line)))


main = cli.main  # (serve, registered last, is listed last among the operator's commands)

__all__ = ["app", "main"]
