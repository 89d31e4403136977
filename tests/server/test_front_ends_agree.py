"""One case through every front end: the Python facade, the CLI (``--json``), HTTP and MCP answer alike.

Each front end only translates the operations (``hrag_pg.operations``): the
same checks, the same errors, the same shapes.  These tests ask the same
thing of each and compare the answers field by field.  The CLI asks a
question through the server here (its in-process path would need the real
model; it runs the same ``Reader``), and reads nodes both ways.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.errors import NotFound, UnknownSetting
from hrag_pg.integrations.langchain import HRAGRetriever
from hrag_pg.operations import remote
from hrag_pg.operations.question import Question
from tests.embedders import HashingEmbedder
from tests.server.conftest import LiveServer
from tests.server.test_live_server import hrag_cli

QUESTION = "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？"
UNKNOWN = "no collection 'nope' in this database; collections: hr, manuals"
DEAD = "postgresql://nobody@127.0.0.1:1/none"


def mcp_call(url: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """(is_error, text) of one MCP tool call over the server's streamable HTTP transport."""

    async def call() -> tuple[bool, str]:
        async with streamable_http_client(url + "/mcp") as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool(tool, arguments)
            return bool(result.is_error), "\n".join(b.text for b in result.content if b.type == "text")

    return asyncio.run(call())


def cli_json(*args: str, server: str | None, database: str) -> tuple[int, Any]:
    done = hrag_cli(*args, "--json", server=server, database=database)
    return done.returncode, json.loads(done.stdout)


def test_an_unknown_collection_is_one_not_found_with_one_message_everywhere(live: LiveServer, ingested: str) -> None:
    hrag = HRAG(ingested, embedder=HashingEmbedder())
    python_calls = [lambda: hrag.retrieve(QUESTION, collection="nope"),
                    lambda: hrag.parent_child(QUESTION, collection="nope"),
                    lambda: hrag.auto_merge(QUESTION, collection="nope"),
                    lambda: hrag.context(QUESTION, collection="nope"),
                    lambda: hrag.outline(collection="nope"),
                    lambda: hrag.sources("nope"),
                    lambda: asyncio.run(AsyncHRAG(hrag).retrieve(QUESTION, collection="nope")),
                    lambda: HRAGRetriever(hrag=hrag, mode="auto", collection="nope").invoke(QUESTION)]
    for call in python_calls:
        with pytest.raises(NotFound) as refused:
            call()
        assert str(refused.value) == UNKNOWN

    for method, path, request in [("POST", "/retrieve", {"json": {"question": QUESTION, "collection": "nope"}}),
                                  ("GET", "/sources", {"params": {"collection": "nope"}}),
                                  ("GET", "/outline", {"params": {"collection": "nope"}})]:
        answer = httpx.request(method, live.url + path, **request)  # type: ignore[arg-type]
        assert (answer.status_code, answer.json()) == (404, {"error": UNKNOWN}), path

    for args in [("query", QUESTION, "-c", "nope"), ("sources", "-c", "nope"), ("outline", "-c", "nope")]:
        for server, database in [(live.url, DEAD), (None, ingested)]:
            assert cli_json(*args, server=server, database=database) == (1, {"error": UNKNOWN}), (args, server)

    for tool, arguments in [("retrieve", {"question": QUESTION, "collection": "nope"}),
                            ("list_sources", {"collection": "nope"}), ("outline", {"collection": "nope"})]:
        # (the MCP SDK says which tool failed before the tool's own message)
        assert mcp_call(live.url, tool, arguments) == (True, f"Error executing tool {tool}: {UNKNOWN}"), tool


def test_a_setting_of_another_mode_is_refused_naming_it_everywhere(live: LiveServer, ingested: str) -> None:
    hrag = HRAG(ingested, embedder=HashingEmbedder())
    with pytest.raises(UnknownSetting) as refused:
        hrag.retrieve(QUESTION, max_parents=2)  # type: ignore[call-arg]
    message = str(refused.value)
    assert message.startswith("max_parents is a setting of parent-child, not of mode auto (it takes ")
    for call in [lambda: asyncio.run(AsyncHRAG(hrag).retrieve(QUESTION, max_parents=2)),  # type: ignore[call-arg]
                 lambda: hrag.reader.retrieve(Question(QUESTION, settings={"max_parents": 2}))]:
        with pytest.raises(UnknownSetting) as again:
            call()
        assert str(again.value) == message
    # (LangChain checks its fields when the retriever is made, and pydantic wraps the message)
    with pytest.raises(ValueError, match=re.escape(message)):
        HRAGRetriever(hrag=hrag, mode="auto", max_parents=2)

    answer = httpx.post(live.url + "/retrieve", json={"question": QUESTION, "max_parents": 2})
    assert (answer.status_code, answer.json()) == (400, {"error": message})

    # the CLI says it in its options' words: the same setting, the same modes
    expected = ("--max-parents applies to --mode parent-child only, not auto (the default mode); drop --max-parents "
                "or pass --mode parent-child")
    for server, database in [(live.url, DEAD), (None, ingested)]:
        assert cli_json("query", QUESTION, "--max-parents", "2", server=server, database=database) == \
            (2, {"error": expected})


def test_a_node_reads_the_same_everywhere_and_its_tokens_are_the_outlines(
        live: LiveServer, ingested: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hrag = HRAG(ingested, embedder=HashingEmbedder())
    outline = {e.node_id: e for e in hrag.outline(collection="hr", max_depth=5)}
    article = next(e for e in outline.values() if e.title == "第4条：諸手当および福利厚生")
    view = hrag.reader.node(article.node_id)
    expected = view.model_dump(mode="json")
    assert view.token_count == article.token_count and view.children
    assert {c.node_id for c in view.children} <= set(outline) | {c.node_id for c in view.children}
    node = hrag.node(article.node_id)
    assert node is not None and (node.token_count, node.content) == (view.token_count, view.content)

    assert httpx.get(f"{live.url}/nodes/{article.node_id}").json() == expected
    monkeypatch.setenv(remote.ENV_SERVER_URL, live.url)
    through = remote.RemoteReader()
    assert through.node(str(article.node_id)).model_dump(mode="json") == expected
    assert through.outline(collection="hr", max_depth=5) == list(outline.values())
    assert through.sources() == hrag.reader.sources()
    for server, database in [(live.url, DEAD), (None, ingested)]:
        assert cli_json("show", str(article.node_id), server=server, database=database) == (0, expected)
    is_error, text = mcp_call(live.url, "read_node", {"node_id": str(article.node_id)})
    assert not is_error and f"clause, depth {view.depth}, collection hr, {view.token_count} tokens" in text
    listed = re.findall(r"^- ([0-9a-f-]{36}) \w+ .* \((\d+) tokens\)$", text, re.M)
    assert listed == [(str(c.node_id), str(c.token_count)) for c in view.children]
    assert text.endswith(view.content)


def test_an_answer_is_the_same_everywhere_and_each_passage_counts_its_nodes_tokens(
        live: LiveServer, ingested: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hrag = HRAG(ingested, embedder=HashingEmbedder())
    reader = hrag.reader
    monkeypatch.setenv(remote.ENV_SERVER_URL, live.url)
    through = remote.RemoteReader()  # (what the CLI's commands call with HRAG_SERVER_URL set)
    for mode, budget in [("auto", 400), ("parent-child", None), ("auto-merge", None)]:
        question = Question(QUESTION, mode=mode, max_tokens=budget, collection="hr")
        expected = reader.retrieve(question).model_dump(mode="json")
        assert expected["results"], mode
        assert through.retrieve(question).model_dump(mode="json") == expected, mode
        body = {"question": QUESTION, "mode": mode, "collection": "hr"} | ({"max_tokens": budget} if budget else {})
        assert httpx.post(live.url + "/retrieve", json=body).json() == expected, mode
        args = ("query", QUESTION, "-m", mode, "-c", "hr") + (("--max-tokens", str(budget)) if budget else ())
        assert cli_json(*args, server=live.url, database=DEAD) == (0, expected), mode
        _, text = mcp_call(live.url, "retrieve", {k: v for k, v in body.items() if k != "max_tokens"}
                                  | {"max_tokens": budget or 100_000})
        headers = re.findall(r"^\[(\d+)\] source: .* \| node ([0-9a-f-]{36}) \| (\d+) tokens \|", text, re.M)
        if budget:  # (MCP always asks within a budget; the unbounded modes' answers are compared above)
            assert headers == [(str(r["rank"]), r["node_id"], str(r["token_count"])) for r in expected["results"]]
        for r in expected["results"]:
            if not r["reason"] or not r["reason"].startswith("part of"):  # (a replaced part is read whole below)
                assert reader.node(r["node_id"]).token_count == r["token_count"], (mode, r["heading_path"])
