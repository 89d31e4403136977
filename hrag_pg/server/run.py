"""Starting the server's transports on a facade: the HTTP app under uvicorn, or the MCP tools on stdio.

The ``hrag serve`` command (:mod:`hrag_pg.main`) parses the options and opens
the facade; what runs after that is the server's, so it lives here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import HragError, install_extra
from . import ENV_TOKEN

if TYPE_CHECKING:
    from ..api import HRAG


def check_serve_extra() -> None:
    """The serve extra's packages, or one line saying how to install them."""
    try:
        import fastapi  # noqa: F401
        import mcp  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise HragError(f"hrag serve needs the serve extra ({exc.name} is not installed): "
                        f"{install_extra('serve')}") from None


def serve_http(hrag: HRAG, *, host: str, port: int, token: str, max_body_bytes: int,
               announce: Callable[[str], None]) -> None:
    """The HTTP API, MCP at /mcp and the inspector, until SIGTERM or Ctrl-C (requests under way finish)."""
    import uvicorn

    from ..api import AsyncHRAG
    from .http import create_app

    app = create_app(lambda: AsyncHRAG(hrag), token=token, max_body_bytes=max_body_bytes, host=host)
    shown = f"[{host}]" if ":" in host else host
    writes = f"need the token in {ENV_TOKEN}" if token else f"disabled ({ENV_TOKEN} is unset)"
    announce(f"hrag serve: http://{shown}:{port} (the inspector /, API docs /docs, MCP /mcp); writes {writes}")
    running = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info",
                                            timeout_graceful_shutdown=30, access_log=False))
    running.run()
    if not running.started:
        raise HragError(f"the server did not start on {host}:{port} (see the lines above)")


def serve_mcp_stdio(hrag: HRAG) -> None:
    """The MCP tools on stdin/stdout; nothing else may write to stdout (it is the protocol's)."""
    import anyio

    from ..api import AsyncHRAG
    from .mcp import run_stdio
    from .service import Service

    async def open_service() -> Service:
        service = Service(AsyncHRAG(hrag))
        await service.warm_up()
        return service

    anyio.run(run_stdio, open_service)
