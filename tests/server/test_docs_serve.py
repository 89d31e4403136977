"""docs/serve.md's curl examples, run as written against a live server (only the port differs)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import ROOT, TOKEN, LiveServer

PAGE = ROOT / "docs" / "serve.md"
DOC_ORIGIN = "http://127.0.0.1:8740"


def curl_lines(page: Path = PAGE) -> list[str]:
    """Every line starting with ``curl`` in the page's ```sh blocks, in order."""
    blocks = re.findall(r"^```sh\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return [line for block in blocks for line in block.splitlines() if line.startswith("curl ")]


def endpoint_of(line: str) -> tuple[str, str]:
    words = shlex.split(line.replace("$NODE_ID", "ID").replace("$HRAG_SERVER_TOKEN", "T"))
    method = words[words.index("-X") + 1] if "-X" in words else "GET"
    url = next(w for w in words if w.startswith(DOC_ORIGIN))
    path = url[len(DOC_ORIGIN):].split("?")[0]
    return method, re.sub(r"^/nodes/ID$", "/nodes/{node_id}", path)


def test_the_examples_cover_every_endpoint(client: object) -> None:
    from fastapi.testclient import TestClient

    assert isinstance(client, TestClient)
    documented = {endpoint_of(line) for line in curl_lines()}
    served = {(method.upper(), path) for path, item in client.get("/openapi.json").json()["paths"].items()
              for method in item}
    assert served | {("POST", "/mcp")} == documented


def test_every_curl_example_answers_without_an_error(live: LiveServer) -> None:
    lines = curl_lines()
    assert len(lines) >= 9
    env = {**os.environ, "HRAG_SERVER_TOKEN": TOKEN}
    for line in lines:
        if "$NODE_ID" in line:
            outline = httpx.get(live.url + "/outline", params={"source": "keys.md", "max_depth": 2}).json()
            env["NODE_ID"] = next(e["node_id"] for e in outline if e["title"] == "Rotation")
        done = subprocess.run(["bash", "-c", line.replace(DOC_ORIGIN, live.url)], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 0, (line, done.stderr)
        answer = json.loads(done.stdout)
        assert not (isinstance(answer, dict) and "error" in answer), (line, answer)
        if "/retrieve" in line:
            assert answer["results"] and answer["results"][0]["source"] == "keys.md", (line, answer)
        if "/nodes/" in line:
            assert "every 90 days" in answer["content"]
        if "/mcp" in line:
            assert {t["name"] for t in answer["result"]["tools"]} == {"retrieve", "list_sources", "outline",
                                                                      "read_node"}
    sources = httpx.get(live.url + "/sources", params={"collection": "manuals"}).json()
    assert [s["source"] for s in sources] == ["guide.md"]  # the DELETE example removed keys.md again


@pytest.mark.parametrize(("written", "drifted"), [
    ("/retrieve", "/retrieval"),                 # an endpoint renamed
    ('"max_tokens": 2000', '"budget": 2000'),    # a field renamed
    ("Bearer $HRAG_SERVER_TOKEN", "$HRAG_SERVER_TOKEN"),  # the header's form
])
def test_a_drifted_example_would_fail(live: LiveServer, written: str, drifted: str, tmp_path: Path) -> None:
    """The check above catches the page drifting from the server (here: one example changed)."""
    page = tmp_path / "serve.md"
    page.write_text(PAGE.read_text(encoding="utf-8").replace(written, drifted), encoding="utf-8")
    line = next(x for x in curl_lines(page) if drifted in x)
    done = subprocess.run(["bash", "-c", line.replace(DOC_ORIGIN, live.url)], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, "HRAG_SERVER_TOKEN": TOKEN})
    assert "error" in json.loads(done.stdout)
