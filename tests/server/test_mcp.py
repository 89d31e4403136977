"""The MCP tools through the SDK's own client: over stdio (a subprocess, as an MCP client starts
``hrag serve --mcp``) and over streamable HTTP (a real server's /mcp)."""

from __future__ import annotations

import re
import sys
from typing import Any

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.server.conftest import ROOT, LiveServer

TOOLS = {"retrieve", "list_sources", "outline", "read_node"}


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def tour(session: ClientSession) -> None:
    """List the tools, then chain them as the descriptions say: list_sources -> outline -> read_node -> retrieve."""
    await session.initialize()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    assert "read_node" in tools["outline"].description and "retrieve" in tools["read_node"].description
    assert tools["retrieve"].input_schema["required"] == ["question"]
    assert tools["retrieve"].input_schema["properties"]["max_tokens"]["default"] == 2000

    sources = text_of(await session.call_tool("list_sources", {}))
    assert "collection hr (1 document):\n- work_rules_ja.md (" in sources and "- guide.md (" in sources

    outline = text_of(await session.call_tool("outline", {"source": "work_rules_ja.md", "max_depth": 2}))
    article = re.search(r"- 第4条：諸手当および福利厚生 \[clause, node ([0-9a-f-]{36}),", outline)
    assert article, outline

    node = text_of(await session.call_tool("read_node", {"node_id": article.group(1)}))
    assert node.startswith(f"node {article.group(1)}: 就業規則 › 第2章 勤務 › 第4条") and "毎月25日" in node
    assert "children (" in node
    assert re.search(r"^- [0-9a-f-]{36} \w+ 4\. 各手当は、毎月25日", node, re.M), node  # an untitled child's lead

    answer = text_of(await session.call_tool("retrieve", {"question": "試用期間中の通勤手当と昼食手当",
                                                          "collection": "hr", "max_tokens": 400}))
    assert re.match(r"\d+ passages? \(mode auto, \d+ of 400 tokens\)", answer), answer
    assert "[1] source: work_rules_ja.md | 就業規則 › " in answer and "| node " in answer

    refused = await session.call_tool("retrieve", {"question": "x", "collection": "nope"})
    assert refused.is_error and "no collection 'nope' in this database; collections: hr, manuals" in text_of(refused)
    unknown = await session.call_tool("read_node", {"node_id": "not-a-node"})
    assert unknown.is_error and "'not-a-node' is not a node id (a UUID)" in text_of(unknown)


async def test_the_tools_answer_over_stdio(ingested: str) -> None:
    server = StdioServerParameters(command=sys.executable, args=["-m", "tests.server.stdio_server", ingested],
                                   cwd=str(ROOT))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await tour(session)


async def test_the_tools_answer_over_streamable_http(live: LiveServer) -> None:
    async with streamable_http_client(live.url + "/mcp") as (read, write), ClientSession(read, write) as session:
        await tour(session)
