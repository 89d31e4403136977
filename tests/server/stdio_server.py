"""``hrag serve --mcp`` with the HashingEmbedder: ``python -m tests.server.stdio_server DATABASE_URL``.

The same ``run_stdio`` the command runs, on a facade whose questions need no model.
"""

from __future__ import annotations

import sys

import anyio

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.server.mcp import run_stdio
from hrag_pg.server.service import Service
from tests.embedders import HashingEmbedder


async def open_service() -> Service:
    return Service(AsyncHRAG(HRAG(sys.argv[1], embedder=HashingEmbedder())))


if __name__ == "__main__":
    anyio.run(run_stdio, open_service)
