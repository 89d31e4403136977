"""A real server process: signals, a kill mid-ingest, and the CLI asking it (HRAG_SERVER_URL)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from hrag_pg import db
from hrag_pg.api import HRAG
from tests.server.app import SLOW_WORD
from tests.server.conftest import ROOT, TOKEN, LiveServer, auth, free_port

V1 = "# Policy\n\n## Alpha\n\nVersion one of the alpha rule.\n\n## Beta\n\nVersion one of the beta rule.\n"
V2 = ("# Policy\n\n## Alpha\n\nVersion two of the alpha rule, " + SLOW_WORD + ".\n\n## Beta\n\nVersion two of the "
      "beta rule.\n\n## Gamma\n\nA new gamma rule.\n")


def stored(url: str, source: str) -> list[tuple[str, str]]:
    """(kind, content) of every node of ``source``, in document order."""
    with psycopg.connect(db.libpq_url(url)) as conn:
        return conn.execute("SELECT n.kind, n.content FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
                            "WHERE d.source = %s ORDER BY n.seq", (source,)).fetchall()


def post_in_background(url: str, body: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def post() -> None:
        try:
            outcome["response"] = httpx.post(url + "/documents", json=body, headers=auth(), timeout=60)
        except httpx.TransportError as exc:
            outcome["error"] = exc

    thread = threading.Thread(target=post)
    thread.start()
    return thread, outcome


def wait_for(path: Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sigterm_finishes_the_ingest_under_way_then_stops(ingested: str, tmp_path: Path) -> None:
    server = LiveServer(ingested, tmp_path, delay=2.0)
    try:
        assert httpx.post(server.url + "/documents", json={"text": V1, "source": "policy.md"},
                          headers=auth()).status_code == 200
        thread, outcome = post_in_background(server.url, {"text": V2, "source": "policy.md"})
        wait_for(server.marker)
        server.process.send_signal(signal.SIGTERM)
        thread.join(60)
        assert server.process.wait(60) in (0, -signal.SIGTERM)  # (uvicorn ends by the signal it finished on)
    finally:
        server.stop()
    assert "response" in outcome, outcome
    assert outcome["response"].status_code == 200 and outcome["response"].json()["status"] == "updated"
    assert [c for _, c in stored(ingested, "policy.md") if "gamma" in c]  # version two, whole
    log = server.output()
    assert "Waiting for application shutdown." in log and "Application shutdown complete." in log  # pools closed
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=2)


def test_a_server_killed_mid_ingest_leaves_the_previous_version_whole(ingested: str, tmp_path: Path) -> None:
    server = LiveServer(ingested, tmp_path, delay=30.0)
    try:
        assert httpx.post(server.url + "/documents", json={"text": V1, "source": "policy.md"},
                          headers=auth()).status_code == 200
        before = stored(ingested, "policy.md")
        thread, outcome = post_in_background(server.url, {"text": V2, "source": "policy.md"})
        wait_for(server.marker)
        server.process.send_signal(signal.SIGKILL)
        thread.join(30)
    finally:
        server.stop()
    assert "error" in outcome  # the client saw the connection drop, not an answer
    assert stored(ingested, "policy.md") == before
    assert any("Version one of the alpha rule." in c for _, c in before)
    hrag = HRAG(ingested)
    assert hrag.repository.check_integrity() == []
    assert [s.source for s in hrag.sources("default")] == ["policy.md"]


# ------------------------------------------------------------------ the CLI through the server


def hrag_cli(*args: str, server: str | None, database: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HRAG_SERVER_URL", "HRAG_DATABASE_URL")}
    env.update({"HRAG_DATABASE_URL": database, "COLUMNS": "200"})
    if server is not None:
        env["HRAG_SERVER_URL"] = server
    return subprocess.run([sys.executable, "-m", "hrag_pg", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("args", [
    ("sources", "--json"), ("sources",), ("sources", "-c", "manuals", "--json"),
    ("outline", "--json"), ("outline", "-c", "hr", "--max-depth", "2"),
    ("outline", "-c", "nope"), ("outline", "--source", "missing.md", "--json"), ("sources", "-c", "nope", "--json"),
], ids=" ".join)
def test_the_cli_prints_the_same_through_the_server(live: LiveServer, ingested: str, args: tuple[str, ...]) -> None:
    # (the database URL is a dead one through the server: the answer cannot come from the database)
    through = hrag_cli(*args, server=live.url, database="postgresql://nobody@127.0.0.1:1/none")
    direct = hrag_cli(*args, server=None, database=ingested)
    assert (through.stdout, through.stderr, through.returncode) == (direct.stdout, direct.stderr, direct.returncode)
    if "--json" in args and direct.returncode == 0:
        assert json.loads(through.stdout)


def test_hrag_show_prints_the_same_through_the_server(live: LiveServer, ingested: str) -> None:
    with psycopg.connect(ingested.replace("postgresql+psycopg://", "postgresql://")) as conn:
        row = conn.execute("SELECT id FROM hrag.nodes WHERE child_count > 0 "
                           "ORDER BY depth DESC, seq LIMIT 1").fetchone()
    assert row is not None
    for args in (("show", str(row[0])), ("show", str(row[0]), "--json"),
                 ("show", "00000000-0000-0000-0000-000000000000"), ("show", "not-a-uuid", "--json")):
        through = hrag_cli(*args, server=live.url, database="postgresql://nobody@127.0.0.1:1/none")
        direct = hrag_cli(*args, server=None, database=ingested)
        assert (through.stdout, through.stderr, through.returncode) == \
            (direct.stdout, direct.stderr, direct.returncode), args


def test_a_query_through_the_server_loads_neither_torch_nor_the_facade(live: LiveServer) -> None:
    code = ("import sys\n"
            "from hrag_pg.cli import app\n"
            "status = app(['query', '試用期間中の通勤手当', '-c', 'hr', '--max-tokens', '500', '--json'], "
            "standalone_mode=False)\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'sentence_transformers', "
            "'sqlalchemy', 'psycopg', 'numpy', 'fastapi') or m in ('hrag_pg.api', 'hrag_pg.embedding'))\n"
            "assert status in (0, None) and not heavy, (status, heavy)\n")
    env = {**os.environ, "HRAG_SERVER_URL": live.url, "HRAG_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["mode"] == "auto" and answer["max_tokens"] == 500 and answer["results"][0]["rank"] == 1


def test_a_query_error_through_the_server_is_the_cli_s_line_and_status(live: LiveServer) -> None:
    dead = "postgresql://nobody@127.0.0.1:1/none"
    unknown = hrag_cli("query", "x", "-c", "nope", server=live.url, database=dead)
    assert unknown.returncode == 1
    assert unknown.stderr == "error: no collection 'nope' in this database; collections: hr, manuals\n"
    other_mode = hrag_cli("query", "x", "--top-k", "0", server=live.url, database=dead)
    assert other_mode.returncode == 2 and other_mode.stderr == "error: --top-k must be between 1 and 1000, got 0\n"
    model = hrag_cli("query", "x", "--model", "e5", server=live.url, database=dead)
    assert model.returncode == 2 and "--model cannot be used through a server" in model.stderr


def test_a_server_that_is_down_is_one_line_and_exit_3(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (("query", "anything", "--json"), ("sources",), ("outline",)):
        done = hrag_cli(*args, server=url, database="postgresql://nobody@127.0.0.1:1/none")
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith(f"error: cannot reach the hrag server at {url} (HRAG_SERVER_URL): ")
        assert done.stderr.count("\n") == 1 and "unset HRAG_SERVER_URL" in done.stderr
    assert json.loads(hrag_cli("query", "x", "--json", server=url, database="-").stdout)["error"].startswith(
        "cannot reach")


def test_writes_through_a_live_server_need_the_token(live: LiveServer) -> None:
    refused = httpx.post(live.url + "/documents", json={"text": V1, "source": "p.md"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
    assert httpx.post(live.url + "/documents", json={"text": V1, "source": "p.md"},
                      headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
