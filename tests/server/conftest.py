"""The server in-process (FastAPI's TestClient) on this test's database, with the fast HashingEmbedder.

``HRAG_SERVER_TOKEN`` is never read from the environment here: each client
names its token (None: writes disabled).  ``ingested`` holds the Japanese
work rules in collection "hr" and an English guide in "manuals".
"""

from __future__ import annotations

import contextlib
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


# ------------------------------------------------------------------ a real server process

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """``uvicorn tests.server.app:make_app --factory`` on a free loopback port (see tests/server/app.py)."""

    def __init__(self, db_url: str, tmp: Path, *, token: str = TOKEN, delay: float = 0.0) -> None:
        import os
        import subprocess
        import sys

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.marker = tmp / "embedding-started"
        self.log = tmp / f"server-{self.port}.log"
        env = {**os.environ, "HRAG_TEST_SERVER_DB": db_url, "HRAG_SERVER_TOKEN": token,
               "HRAG_TEST_EMBED_DELAY": str(delay), "HRAG_TEST_EMBED_MARKER": str(self.marker)}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "tests.server.app:make_app", "--factory", "--host", "127.0.0.1",
                 "--port", str(self.port), "--timeout-graceful-shutdown", "30"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.wait_ready()

    def wait_ready(self, timeout: float = 60.0) -> None:
        import time

        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited {self.process.returncode}: {self.output()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"the server did not start in {timeout:.0f} s: {self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


@contextlib.contextmanager
def hrag_serve(db_url: str, log_path: Path) -> Iterator[str]:
    """``hrag serve`` itself (the real model, HRAG_DATABASE_URL) on a free port: its URL once the model is
    loaded; stopped with SIGTERM after, which must shut it down cleanly."""
    import os
    import subprocess
    import sys
    import time

    import httpx

    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "HRAG_SERVER_URL"}
    env["HRAG_DATABASE_URL"] = db_url
    with log_path.open("wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "hrag_pg", "serve", "--port", str(port)], cwd=ROOT,
                                   env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                assert process.poll() is None, log_path.read_text()
                try:
                    if httpx.get(url + "/health", timeout=2).json().get("model_loaded"):
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, "hrag serve did not start"
                time.sleep(0.2)
            yield url
        finally:
            process.terminate()
            process.wait(60)
    assert "Application shutdown complete." in log_path.read_text()


@pytest.fixture
def live(ingested: str, tmp_path: Path) -> Iterator[LiveServer]:
    """A real server process on the ingested database, writes enabled with TOKEN."""
    server = LiveServer(ingested, tmp_path)
    yield server
    server.stop()
