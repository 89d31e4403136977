"""AsyncHRAG: the sync flow's results, on a connection pool, with budget, ingestion and ``async with``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.db import libpq_url
from hrag_pg.settings import AutoMergeSettings, ParentChildSettings
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUESTIONS = [
    "試用期間中の通勤手当と昼食手当", "給与の支払日", "私物端末の業務利用", "ウイルス対策ソフト",
    "パスワードの長さ", "年次有給休暇", "退職の手続き", "情報漏えいの報告",
]


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest([FIXTURES / "work_rules_ja.md", FIXTURES / "security_policy_ja.md"])
    return h


@pytest.mark.parametrize("mode", ["parent_child", "auto_merge"])
async def test_sixteen_concurrent_async_calls_equal_the_sync_results_and_use_several_connections(
        hrag: HRAG, mode: str) -> None:
    questions = (QUESTIONS * 2)[:16]
    expected = [getattr(hrag, mode)(q) for q in questions]
    async with AsyncHRAG(hrag) as ahrag:
        got = await asyncio.gather(*(getattr(ahrag, mode)(q) for q in questions))
        stats = (await ahrag.repository.pool()).get_stats()
    assert [[r.model_dump() for r in rs] for rs in got] == [[r.model_dump() for r in rs] for rs in expected]
    assert all(got), "every question finds something"
    # One locked connection would never need a second one.
    assert stats["pool_size"] > 1, stats


async def test_async_context_applies_the_same_budget_as_the_sync_context(hrag: HRAG) -> None:
    sync = hrag.context(QUESTIONS[0], ParentChildSettings(max_tokens=200))
    async with AsyncHRAG(hrag) as ahrag:
        got = await ahrag.context(QUESTIONS[0], ParentChildSettings(max_tokens=200))
    assert got.model_dump() == sync.model_dump()
    assert got.total_tokens <= 200


async def test_async_ingest_runs_the_sync_ingest_and_its_text_is_then_retrievable(db_url: str) -> None:
    async with AsyncHRAG(HRAG(db_url, embedder=HashingEmbedder())) as ahrag:
        report = await ahrag.ingest([FIXTURES / "guide.md"], collection="guide")
        assert [r.status for r in report.results] == ["created"]
        results = await ahrag.auto_merge("pgvector extension version", collection="guide")
    assert results and all(r.document_id == report.results[0].document_id for r in results)


async def test_an_async_call_cancelled_while_blocked_stops_in_the_server_and_the_pool_serves_the_next(
        hrag: HRAG, db_url: str) -> None:
    """A caller's timeout (a web request given up) cancels the statement; nothing of it keeps running.

    The read waits on a lock another session holds.  Cancelled, it must not
    become an hrag error, not stay queued on the lock in the server, and not
    leave the pool a connection stuck mid-command.
    """
    expected = hrag.auto_merge(QUESTIONS[2])
    url = libpq_url(db_url)
    with psycopg.connect(url) as locker, psycopg.connect(url, autocommit=True) as observer:
        async with AsyncHRAG(hrag) as ahrag:
            await ahrag.auto_merge(QUESTIONS[0])  # the pool is open and warm
            locker.execute("LOCK TABLE hrag.nodes IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(ahrag.auto_merge(QUESTIONS[2]), timeout=1.0)
            waiting = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()").fetchone()
            assert waiting == (0,), "the cancelled statement still waits on the lock in the server"
            locker.rollback()
            got = await asyncio.wait_for(ahrag.auto_merge(QUESTIONS[2]), timeout=30)
    assert [r.model_dump() for r in got] == [r.model_dump() for r in expected]


def test_aretrieve_works_from_two_event_loops_one_after_the_other(hrag: HRAG) -> None:
    retriever = hrag.retriever(AutoMergeSettings())
    first = asyncio.run(retriever.aretrieve(QUESTIONS[1]))
    second = asyncio.run(retriever.aretrieve(QUESTIONS[1]))  # the first loop's pool is gone
    sync = retriever.retrieve(QUESTIONS[1])
    assert [r.node_id for r in first] == [r.node_id for r in second] == [r.node_id for r in sync]


def test_the_sync_facade_is_a_context_manager(db_url: str) -> None:
    with HRAG(db_url, embedder=HashingEmbedder()) as h:
        h.ingest([FIXTURES / "work_rules_ja.md"])
        assert h.parent_child(QUESTIONS[0], ParentChildSettings(max_parents=1))
    assert h.parent_child(QUESTIONS[0]), "closing returns connections; the facade reconnects on use"


async def test_an_async_read_whose_pooled_connections_died_runs_again_and_answers(hrag: HRAG, db_url: str) -> None:
    """The pool's backends are terminated while idle (as a server restart would): the next call still answers."""
    question = QUESTIONS[2]
    expected = [r.model_dump() for r in hrag.parent_child(question)]
    async with AsyncHRAG(hrag) as ahrag:
        assert [r.model_dump() for r in await ahrag.parent_child(question)] == expected
        with psycopg.connect(libpq_url(db_url), autocommit=True) as killer:
            killed = killer.execute(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle'").fetchone()
        assert killed is not None and killed[0] >= 1
        assert [r.model_dump() for r in await ahrag.parent_child(question)] == expected
