"""``hrag serve`` itself, with the real model: ``hrag query`` prints the same with HRAG_SERVER_URL as without."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hrag_pg.api import HRAG
from tests.server.conftest import GUIDE, RULES, hrag_serve
from tests.server.test_live_server import hrag_cli

pytestmark = pytest.mark.model

QUERIES = [
    ("試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "-c", "hr", "--json"),
    ("試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "-c", "hr", "--max-tokens", "300", "--json"),
    ("How do I check pgvector?", "-c", "manuals", "--mode", "auto-merge", "--top-k", "6", "--json"),
    ("How do I check pgvector?", "--json"),  # two collections, two models: each searched with its own
    ("How do I check pgvector?", "-c", "manuals", "--max-tokens", "200"),
    ("退職の手続", "-c", "hr", "--mode", "parent-child", "--max-parents", "2"),
]


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[str]:
    hrag = HRAG(db_url)
    hrag.ingest_text(RULES, source="work_rules_ja.md", collection="hr")
    hrag.ingest_text(GUIDE, source="guide.md", collection="manuals", metadata={"lang": "en"})
    with hrag_serve(db_url, tmp_path / "serve.log") as url:
        yield url


@pytest.mark.parametrize("args", QUERIES, ids=lambda a: " ".join(a[1:]) or "default")
def test_hrag_query_prints_the_same_through_hrag_serve(served: str, db_url: str, args: tuple[str, ...]) -> None:
    started = time.perf_counter()
    through = hrag_cli("query", *args, server=served, database="postgresql://nobody@127.0.0.1:1/none")
    through_seconds = time.perf_counter() - started
    started = time.perf_counter()
    direct = hrag_cli("query", *args, server=None, database=db_url)
    direct_seconds = time.perf_counter() - started
    print(f"\nhrag query {' '.join(args[1:])}: {through_seconds:.2f} s through the server, "
          f"{direct_seconds:.2f} s without")
    assert (through.stdout, through.stderr, through.returncode) == (direct.stdout, direct.stderr, direct.returncode)
    assert direct.returncode == 0, direct.stderr


def test_one_retrieve_request_to_hrag_serve(served: str) -> None:
    body = {"question": QUERIES[0][0], "collection": "hr", "max_tokens": 2000}
    with httpx.Client(base_url=served) as client:
        client.post("/retrieve", json=body)  # (the connection is made)
        started = time.perf_counter()
        answer = client.post("/retrieve", json=body)
        print(f"\nPOST /retrieve: {1000 * (time.perf_counter() - started):.0f} ms")
    assert answer.status_code == 200 and "毎月25日" in answer.json()["results"][0]["content"]
