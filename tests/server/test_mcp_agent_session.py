"""An agent's MCP session on the seed's three Japanese cases, with the real model, over stdio.

``hrag serve --mcp`` runs as an MCP client starts it (a subprocess on the
examples' database: collections hr, security, manual), and the session does
what an agent does with the tools' text: ``outline`` the collection, pick the
article by its title on an outline line and take the node id printed there,
``read_node`` it (and, for the narrow question, the child paragraph whose
text starts with 8.1), then ``retrieve`` the question.  The answer must be in
the node read and in the first passage retrieved (the cases of hrag_pg/demo.py,
the design's worked examples).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from hrag_pg import demo
from tests.acceptance.conftest import examples_url  # noqa: F401 (the module's database of the examples)
from tests.server.conftest import ROOT

pytestmark = pytest.mark.model

PROBATION, ANTIVIRUS, BYOD = demo.CASES[:3]
#: The three obligations of 第8条 (8.1 anti-virus, 8.2 screen lock, 8.3 loss reported within 24 hours).
BYOD_ITEMS = ("ウイルス対策ソフト", "6桁以上のパスコード", "24時間以内に情報システム部へ報告")
NODE_ID = r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"


def text_of(result: Any) -> str:
    assert not result.is_error, result.content
    return "\n".join(block.text for block in result.content if block.type == "text")


def id_on_line(text: str, pattern: str) -> str:
    """The node id printed on the one line matching ``pattern`` (an outline entry, a child of read_node)."""
    lines = [line for line in text.splitlines() if re.search(pattern, line)]
    assert len(lines) == 1, f"{len(lines)} lines match {pattern!r} in:\n{text}"
    found = re.search(NODE_ID, lines[0])
    assert found, f"no node id on {lines[0]!r}"
    return found.group(1)


def passages(text: str) -> list[tuple[str, str, str]]:
    """retrieve's passages as (header, node id, content), in rank order."""
    blocks = re.split(r"\n\n(?=\[\d+\] source: )", text.split("\n\nOver the budget")[0])[1:]
    out = []
    for block in blocks:
        header, _, content = block.partition("\n")
        node = re.search(r"\| node " + NODE_ID + r" \|", header)
        assert node, header
        out.append((header, node.group(1), content))
    assert out, text
    return out


async def all_passages(session: ClientSession, case: demo.DemoCase,
                       mode: str | None = None) -> list[tuple[str, str, str]]:
    answer = text_of(await session.call_tool("retrieve", {"question": case.question, "collection": case.collection,
                                                          "mode": mode or case.mode}))
    return passages(answer)


async def first_passage(session: ClientSession, case: demo.DemoCase, mode: str | None = None) -> tuple[str, str, str]:
    return (await all_passages(session, case, mode))[0]


async def agent_session(session: ClientSession) -> None:
    await session.initialize()

    # 1. 試用期間中の通勤手当・昼食手当: 第4条, with the payment day (item 4)
    outline = text_of(await session.call_tool("outline", {"collection": "hr"}))
    article_4 = id_on_line(outline, r"- 第4条")
    read = text_of(await session.call_tool("read_node", {"node_id": article_4}))
    assert read.startswith(f"node {article_4}: 就業規則 › ") and "第4条" in read.splitlines()[0]
    assert "試用期間中の従業員については、通勤手当は全額実費支給" in read and "毎月25日" in read
    for mode in (PROBATION.mode, "auto"):  # the seed's mode, then the tool's default
        header, node, content = await first_passage(session, PROBATION, mode)
        assert node == article_4 and "第4条" in header and "毎月25日" in content, (mode, header, content)

    # 2. ウイルス対策ソフト, narrow: 8.1 alone
    outline = text_of(await session.call_tool("outline", {"collection": "security"}))
    article_8 = id_on_line(outline, r"- 第8条")
    read = text_of(await session.call_tool("read_node", {"node_id": article_8}))
    item_1 = id_on_line(read, r"^- .* 8\.1 ")  # the child whose text starts with 8.1
    read = text_of(await session.call_tool("read_node", {"node_id": item_1}))
    assert read.startswith(f"node {item_1}: 情報セキュリティ管理規程 › ")
    assert "ウイルス対策ソフト" in read and "8.2" not in read and "8.3" not in read
    header, node, content = await first_passage(session, ANTIVIRUS)
    assert node == item_1 and content.startswith("8.1") and "ウイルス対策ソフト" in content, (header, content)
    assert "8.2" not in content and "8.3" not in content

    # 3. BYOD obligations, broad: 第8条 with 8.1-8.3 (e5 puts the definition of BYOD, 第2条, first)
    read = text_of(await session.call_tool("read_node", {"node_id": article_8}))
    assert "第8条（BYOD）" in read.splitlines()[0] and all(item in read for item in BYOD_ITEMS)
    for mode in (BYOD.mode, "auto"):
        found = await all_passages(session, BYOD, mode)
        header, node, content = next(p for p in found if p[1] == article_8)
        assert header.split(" | ")[1].endswith("第8条（BYOD）"), (mode, header)
        assert all(item in content for item in BYOD_ITEMS), (mode, content)
        assert not any(p[2].lstrip("#").lstrip().startswith("第2章") for p in found), "not the chapter around it"


async def test_an_agent_answers_the_seed_cases_through_the_mcp_tools(examples_url: str) -> None:  # noqa: F811
    env = {**os.environ, "HRAG_DATABASE_URL": examples_url,
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("HRAG_SERVER_URL", None)
    server = StdioServerParameters(command=sys.executable, args=["-m", "hrag_pg", "serve", "--mcp"],
                                   cwd=str(ROOT), env=env)
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await agent_session(session)
