"""The server in-process (FastAPI's TestClient) on this test's database, with the fast HashingEmbedder.

``HRAG_SERVER_TOKEN`` is never read from the environment here: each client
names its token (None: writes disabled).  ``ingested`` holds the Japanese
work rules in collection "hr" and an English guide in "manuals".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.server.http import create_app
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RULES = (FIXTURES / "work_rules_ja.md").read_text(encoding="utf-8")
GUIDE = (FIXTURES / "guide.md").read_text(encoding="utf-8")
TOKEN = "s3cret-test-token"
#: The loopback origin the MCP transport's DNS-rebinding check accepts.
BASE_URL = "http://127.0.0.1:8740"


def facade_factory(url: str) -> Callable[[], AsyncHRAG]:
    return lambda: AsyncHRAG(HRAG(url, embedder=HashingEmbedder()))


@pytest.fixture
def ingested(db_url: str) -> str:
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_text(RULES, source="work_rules_ja.md", collection="hr")
    hrag.ingest_text(GUIDE, source="guide.md", collection="manuals", metadata={"lang": "en"})
    return db_url


@pytest.fixture
def make_client(db_url: str) -> Iterator[Callable[..., TestClient]]:
    """``make_client(token=None, url=db_url, **create_app options)``: a started TestClient."""
    opened: list[TestClient] = []

    def make(token: str | None = None, url: str | None = None, **options: object) -> TestClient:
        app = create_app(facade_factory(url or db_url), token=token or "", **options)  # type: ignore[arg-type]
        client = TestClient(app, base_url=BASE_URL, raise_server_exceptions=False)
        client.__enter__()
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.__exit__(None, None, None)


@pytest.fixture
def client(ingested: str, make_client: Callable[..., TestClient]) -> TestClient:
    """A server with the token TOKEN, on the ingested database."""
    return make_client(TOKEN)


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
