"""Writers at the same time: the locks that serialise them, each tried by holding one writer mid-transaction.

Every write is one transaction, but a transaction alone does not stop two of
them from crossing: a reembed's switch could commit between an ingest's
reading of the collection's model and its commit, two ingests of one file
could interleave their rows, two bulk loads could drop and rebuild the one
vector index under each other.  Each test holds a writer inside its
transaction (its embedder waits, as a slow model would, after the write's
locks are taken), starts the other writer on its own connection, waits until
that one either blocks on a lock or finishes, then lets the first go on and
checks what is stored.  Without the lock each guards, the second writer does
not wait and the stored result is wrong; docs/guarantees.md names each test.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hrag_pg import repository
from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.errors import IngestError, ModelMismatchError
from tests.embedders import HashingEmbedder, SaltedHashingEmbedder
from tests.stored_rows import DOCS, assert_rows_equal, expected_rows, node_rows, recorded_model

#: How long a test waits for a writer to block or finish before it fails.
PATIENCE = 60.0


class HeldEmbedder(HashingEmbedder):
    """The hashing model, whose first call waits until the test releases it (``entered`` says it is waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> Any:
        self.entered.set()
        if not self.release.wait(PATIENCE):
            raise TimeoutError("the test never released this writer")
        return super().embed(texts)


class Outcome:
    """A call run on its own thread: its result or its exception."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self.thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self.result = call()
        except Exception as exc:  # noqa: BLE001 (raised again by join, in the test's thread)
            self.error = exc

    def join(self) -> Any:
        self.thread.join(PATIENCE)
        assert not self.thread.is_alive(), "a writer did not finish"
        if self.error is not None:
            raise self.error
        return self.result


def _blocked_or_done(sql: psycopg.Connection, other: Outcome) -> str:
    """Wait until a backend of this database waits for a lock (the second writer), or the second writer ended."""
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        if not other.thread.is_alive():
            return "done"
        waiting = sql.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                              "AND wait_event_type = 'Lock'").fetchone()
        if waiting and waiting[0] > 0:
            return "blocked"
        time.sleep(0.05)
    raise AssertionError("the second writer neither blocked nor finished")


def _held(db_url: str, call: Callable[[HRAG], Any]) -> tuple[HeldEmbedder, Outcome]:
    """Start ``call`` with a held hashing model and wait until it is inside its transaction, embedding."""
    embedder = HeldEmbedder()
    outcome = Outcome(lambda: call(HRAG(db_url, embedder=embedder)))
    if not embedder.entered.wait(PATIENCE):
        outcome.join()
        raise AssertionError("the held writer never started embedding")
    return embedder, outcome


def test_an_ingest_and_a_reembeds_switch_never_cross(
        stored: HRAG, db_url: str, sql: psycopg.Connection, tmp_path: Path) -> None:
    """One model per collection under a race: the write's model check and its commit are not split by a switch.

    The writer has read the collection's model (the old one, FOR SHARE) and
    is embedding a new document with it when a reembed to another model
    starts.  The reembed must wait for the write, then prepare that document
    too; had it switched in between, the document would be stored with the
    old model's vectors under the new model's record.
    """
    new = tmp_path / "handbook.md"
    new.write_text("# Handbook\n\n## Leave\n\nLeave is requested a week ahead.\n\n"
                   "## Travel\n\nTravel is booked through the office.\n", encoding="utf-8")
    writer, writing = _held(db_url, lambda hrag: hrag.ingest([new], collection="c"))
    reembedding = Outcome(lambda: stored.reembed("c", SaltedHashingEmbedder()))
    seen = _blocked_or_done(sql, reembedding)
    writer.release.set()
    assert writing.join().results[0].status == "created"
    reembedding.join()

    assert recorded_model(sql)[0] == "hashing-salted"
    expected: dict[Any, tuple[Any, ...]] = {}
    for path in (*DOCS, new):
        expected.update(expected_rows(path, SaltedHashingEmbedder()))
    assert_rows_equal(node_rows(sql), expected)  # every vector the new model's, the written document's too
    assert seen == "blocked", "the reembed did not wait for the write in progress"


def test_two_ingests_of_one_document_at_once_leave_one_whole_version(
        stored: HRAG, db_url: str, sql: psycopg.Connection, tmp_path: Path) -> None:
    """No half-written tree: the second re-ingest of a file waits for the first and replaces its tree whole."""
    first, second = tmp_path / "first" / "guide.md", tmp_path / "second" / "guide.md"
    for path, edit in ((first, "First edit."), (second, "Second edit, longer: another sentence here.")):
        path.parent.mkdir()
        path.write_text(DOCS[0].read_text(encoding="utf-8").replace("\n\n", f"\n\n{edit} ", 2), encoding="utf-8")
    writer, writing = _held(db_url, lambda hrag: hrag.ingest([first], collection="c", source="guide.md",
                                                             replace=True))
    other = Outcome(lambda: HRAG(db_url, embedder=HashingEmbedder()).ingest([second], collection="c",
                                                                            source="guide.md", replace=True))
    seen = _blocked_or_done(sql, other)
    writer.release.set()
    assert writing.join().results[0].status == "updated"
    assert other.join().results[0].status == "updated"

    expected: dict[Any, tuple[Any, ...]] = {}
    for path in (second, *DOCS[1:]):
        expected.update(expected_rows(path, HashingEmbedder()))
    assert_rows_equal(node_rows(sql), expected)
    assert sql.execute("SELECT count(*) FROM hrag.check_integrity()").fetchone() == (0,)
    assert seen == "blocked", "the second ingest of the file did not wait for the first"


def test_a_second_bulk_load_is_refused_while_one_runs_and_a_plain_ingest_is_indexed_after_it(
        db_url: str, sql: psycopg.Connection, monkeypatch: pytest.MonkeyPatch) -> None:
    """One bulk load at a time: the second is refused by name, and the vector index comes back over every row.

    A bulk load drops the vector index and rebuilds it at its end; a second
    one at the same time would find it gone and rebuild it while the first
    still loads.  A plain ingest meanwhile writes without the index and is
    covered by the rebuild (PostgreSQL builds an index over every committed row).
    """
    monkeypatch.setattr(repository, "BULK_LOCK_WAIT", "1s")
    loader, loading = _held(db_url, lambda hrag: hrag.ingest(DOCS[:2], collection="bulk", bulk=True))
    second = Outcome(lambda: HRAG(db_url, embedder=HashingEmbedder()).ingest(DOCS[2:], collection="other",
                                                                             bulk=True))
    with pytest.raises(IngestError, match="another bulk load is running on this database"):
        second.join()
    plain = HRAG(db_url, embedder=HashingEmbedder()).ingest(DOCS[2:], collection="plain")
    assert plain.results[0].status == "created"
    loader.release.set()
    assert [r.status for r in loading.join().results] == ["created", "created"]

    assert sql.execute("SELECT hrag._vector_index_state()").fetchone() == ("valid",)
    counts = dict(sql.execute("SELECT collection, count(*) FROM hrag.documents GROUP BY 1").fetchall())
    assert counts == {"bulk": 2, "plain": 1}


def test_a_question_embedded_before_a_reembed_switched_its_collection_is_refused_not_answered(
        stored: HRAG, db_url: str, sql: psycopg.Connection) -> None:
    """No answer mixes models: the statement checks the question's model against the record it searches under.

    The reader remembers the collection's model for a few seconds (one round
    trip per question); a reembed by another process switches the collection
    meanwhile.  The reader's next question, embedded with the old model, must
    not be ranked among the new model's vectors: the statement refuses it, the
    reader looks the model up again, and (its embedder being the old model) says so.
    """
    reader = HRAG(db_url, embedder=HashingEmbedder())
    assert reader.retrieve("試用期間", collection="c")  # the collection's model, now remembered
    HRAG(db_url, embedder=HashingEmbedder()).reembed("c", SaltedHashingEmbedder())
    with pytest.raises(ModelMismatchError, match="hashing-salted"):
        reader.retrieve("試用期間", collection="c")
    with pytest.raises(ModelMismatchError, match="hashing-salted"):
        reader.parent_child("試用期間", collection="c")

    # The check itself, as psql sees it: another model is refused by SQLSTATE, no model passes unchecked.
    with pytest.raises(psycopg.DatabaseError, match="collection c holds vectors of hashing-salted now") as refused:
        sql.execute("SELECT hrag._checked_collection('c', 'hashing-test', '')")
    assert refused.value.sqlstate == "HRM01"
    assert sql.execute("SELECT hrag._checked_collection('c', NULL, NULL)").fetchone() == ("c",)
    assert sql.execute("SELECT hrag._checked_collection(NULL, 'hashing-salted', '')").fetchone() == (None,)


async def test_an_async_reader_is_refused_the_same_way(stored: HRAG, db_url: str) -> None:
    """The async facade (the server's) reads through its own pool: the refusal is the same, not a lost connection."""
    reader = AsyncHRAG(HRAG(db_url, embedder=HashingEmbedder()))
    try:
        assert await reader.retrieve("試用期間", collection="c")
        HRAG(db_url, embedder=HashingEmbedder()).reembed("c", SaltedHashingEmbedder())
        with pytest.raises(ModelMismatchError, match="hashing-salted"):
            await reader.retrieve("試用期間", collection="c")
    finally:
        await reader.close()
