"""What the CLI says when the server at HRAG_SERVER_URL is away, misconfigured or answers something odd.

The answers come from a real HTTP server on loopback that plays the part of a proxy or a broken
deployment in front of hrag (a plain-text 502, a slow answer); hrag's own server's errors are
tested against it in tests/server.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from hrag_pg.errors import HragError, InvalidArgument, NotFound, ServerUnavailable
from hrag_pg.operations import remote
from hrag_pg.operations.question import Question

#: path -> (status, content type, body, seconds to wait first)
ANSWERS = {
    "/sources": (502, "text/html", b"<html>Bad Gateway</html>", 0.0),
    "/outline": (422, "application/json", b'{"error": "max_depth: Input should be a valid integer"}', 0.0),
    "/nodes/x": (404, "application/json", b'{"error": "no node x in this database"}', 0.0),
    "/retrieve": (200, "application/json", b"{}", 1.0),
    "/documents": (503, "application/json", b'{"error": "the database is unreachable"}', 0.0),
}


class Canned(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        status, kind, body, wait = ANSWERS[self.path.split("?")[0]]
        time.sleep(wait)
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # (the slow answer's client has given up)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    monkeypatch.setenv(remote.ENV_SERVER_URL, url + "/")
    yield url
    httpd.shutdown()


def test_an_odd_answer_is_an_error_naming_the_server_and_its_status(server: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    reader = remote.RemoteReader()
    with pytest.raises(HragError, match=f"^the hrag server at {server} answered 502 Bad Gateway to /sources$"):
        reader.sources()
    with pytest.raises(InvalidArgument, match=r"^max_depth: Input should be a valid integer$"):
        reader.outline()
    with pytest.raises(NotFound, match=r"^no node x in this database$"):
        reader.node("x")
    with pytest.raises(HragError, match=r"^the database is unreachable$"):
        reader.delete("a.md")
    monkeypatch.setattr(remote, "TIMEOUT", 0.2)
    with pytest.raises(HragError, match=r"did not answer within 0 s"):
        reader.retrieve(Question("x"))


def test_a_server_that_is_away_or_misnamed_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(remote.ENV_SERVER_URL, f"http://127.0.0.1:{port}")
    with pytest.raises(ServerUnavailable, match=f"cannot reach the hrag server at http://127.0.0.1:{port} "):
        remote.RemoteReader().sources()
    monkeypatch.setenv(remote.ENV_SERVER_URL, "127.0.0.1:8740")
    with pytest.raises(ValueError, match=r"must be an http:// or https:// URL, got '127\.0\.0\.1:8740'"):
        remote.RemoteReader().sources()
    monkeypatch.setenv(remote.ENV_SERVER_URL, "  ")
    assert remote.server_url() is None
    with pytest.raises(HragError, match="HRAG_SERVER_URL is not set"):
        remote.RemoteReader().sources()
