"""The per-collection lexical statistics (revision 0021) equal the documents' own rows, always.

``hrag.collection_terms`` and ``hrag.collection_sizes`` are what the lexical
channel reads; statement triggers on ``document_terms`` and ``documents``
keep them.  Each test compares them with the sums over the documents' rows
(the oracle: what every revision before 0021 read) after the writes a user
makes: ingesting, editing and re-ingesting, deleting a document (a cascade),
deleting a collection, and two writers at once.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql as pgsql

from tests.sqltree import Spec, insert_tree, unit

TERMS = """
SELECT coalesce(c.collection, a.collection), coalesce(c.term, a.term), coalesce(c.leaves, 0), coalesce(a.leaves, 0)
  FROM (SELECT collection, term, sum(leaves)::bigint AS leaves FROM hrag.collection_terms GROUP BY 1, 2) c
  FULL JOIN (SELECT collection, term, sum(leaves)::bigint AS leaves FROM hrag.document_terms GROUP BY 1, 2) a
    ON a.collection = c.collection AND a.term = c.term
"""
SIZES = """
SELECT coalesce(c.collection, a.collection), c.targets, c.tokens, a.targets, a.tokens
  FROM (SELECT collection, sum(search_targets)::bigint AS targets, sum(total_tokens)::bigint AS tokens
          FROM hrag.collection_sizes GROUP BY 1) c
  FULL JOIN (SELECT collection, sum(search_targets)::bigint AS targets, sum(total_tokens)::bigint AS tokens
               FROM hrag.documents GROUP BY 1) a ON a.collection = c.collection
"""


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


def assert_statistics_match(conn: psycopg.Connection) -> None:
    wrong = [r for r in conn.execute(TERMS).fetchall() if r[2] != r[3]]
    assert wrong == [], f"collection_terms differs from document_terms: {wrong[:5]}"
    sizes = [r for r in conn.execute(SIZES).fetchall() if (r[1] or 0, r[2] or 0) != (r[3] or 0, r[4] or 0)]
    assert sizes == [], f"collection_sizes differs from the documents: {sizes}"
    assert conn.execute("SELECT count(*) FROM hrag.check_integrity()").fetchone()[0] == 0


def _document(conn: psycopg.Connection, key: str, texts: list[str], collection: str = "manuals") -> object:
    leaves = [Spec(f"{key}{i}", text, unit({i % 8: 1.0}), kind="paragraph") for i, text in enumerate(texts)]
    built = insert_tree(conn, Spec(key, kind="document", children=[Spec(f"{key}-s", "Section", children=leaves)]),
                        collection=collection)
    conn.execute("SELECT hrag.refresh_document_terms(%s)", (built.document_id,))
    return built


def test_the_statistics_follow_ingestion_edits_deletions_and_collections(conn: psycopg.Connection) -> None:
    one = _document(conn, "one", ["Vacuum reclaims storage.", "Vacuum and analyze the table.", "Indexes help."])
    _document(conn, "two", ["Analyze collects statistics.", "Vacuum freezes old rows."])
    _document(conn, "three", ["Vacuum in another collection."], collection="other")
    assert_statistics_match(conn)
    weights = {t: df for t, df, _ in conn.execute(
        "SELECT * FROM hrag._term_weights(ARRAY['vacuum', 'analyz', 'index'], 'manuals')").fetchall()}
    assert weights == {"vacuum": 3, "analyz": 2, "index": 1}
    assert conn.execute("SELECT search_targets FROM hrag.collection_sizes WHERE collection = 'manuals'"
                        ).fetchone()[0] == 5

    # an edit of one leaf, then the document's refresh as ingestion runs it
    conn.execute("UPDATE hrag.nodes SET content = 'Checkpoints flush dirty pages.' WHERE id = %s",
                 (one.ids["one0"],))
    conn.execute("SELECT hrag.refresh_document_terms(%s)", (one.document_id,))
    assert_statistics_match(conn)
    assert conn.execute("SELECT sum(leaves) FROM hrag.collection_terms WHERE term = 'checkpoint'").fetchone()[0] == 1

    # auto-merge's hit share reads the same size
    assert conn.execute("SELECT hrag.sample_hits(100, 'manuals', 0.5)").fetchone()[0] == 3  # ceil(0.5 x 5)
    conn.execute("DELETE FROM hrag.documents WHERE id = %s", (one.document_id,))  # cascades to its rows
    assert_statistics_match(conn)
    assert conn.execute("SELECT hrag.sample_hits(100, 'manuals', 0.5)").fetchone()[0] == 1  # ceil(0.5 x 2)
    conn.execute("DELETE FROM hrag.documents WHERE collection = 'manuals'")
    assert_statistics_match(conn)
    assert [r[0] for r in conn.execute("SELECT DISTINCT collection FROM hrag.collection_terms")] == ["other"]


def test_a_refresh_of_an_unchanged_document_writes_no_statistics_row(conn: psycopg.Connection) -> None:
    built = _document(conn, "one", ["Vacuum reclaims storage.", "Analyze collects statistics."])
    before = conn.execute("SELECT ctid::text, * FROM hrag.collection_terms ORDER BY term").fetchall()
    conn.execute("SELECT hrag.refresh_document_terms(%s)", (built.document_id,))
    assert conn.execute("SELECT ctid::text, * FROM hrag.collection_terms ORDER BY term").fetchall() == before


def test_two_writers_of_one_collection_do_not_wait_for_each_other(db_url: str, conn: psycopg.Connection) -> None:
    """Both change the count of a term the collection already has; neither holds the other up."""
    first = _document(conn, "one", ["Vacuum reclaims storage.", "Indexes help."])
    second = _document(conn, "two", ["Vacuum freezes old rows.", "Indexes help."])
    conn.commit()
    url = psycopg.conninfo.make_conninfo(db_url.replace("postgresql+psycopg://", "postgresql://"))
    with psycopg.connect(url) as a, psycopg.connect(url) as b:
        for writer, built in ((a, first), (b, second)):
            writer.execute("SET lock_timeout = '2s'")
            writer.execute("UPDATE hrag.nodes SET content = 'Indexes help vacuum.' WHERE id = %s",
                           (built.ids[f"{'one' if built is first else 'two'}1"],))
        a.execute("SELECT hrag.refresh_document_terms(%s)", (first.document_id,))  # a holds vacuum's row, open
        started = time.perf_counter()
        b.execute("SELECT hrag.refresh_document_terms(%s)", (second.document_id,))
        assert time.perf_counter() - started < 1.0, "the second writer waited for the first"
        b.commit()
        a.commit()
    assert conn.execute("SELECT count(*), sum(leaves)::int FROM hrag.collection_terms WHERE term = 'vacuum'"
                        ).fetchone() == (2, 4)
    assert_statistics_match(conn)
    # the next write that changes the term's count folds the two rows into one
    conn.execute("UPDATE hrag.nodes SET content = 'Indexes help.' WHERE id = %s", (first.ids["one1"],))
    conn.execute("SELECT hrag.refresh_document_terms(%s)", (first.document_id,))
    assert conn.execute("SELECT count(*), sum(leaves)::int FROM hrag.collection_terms WHERE term = 'vacuum'"
                        ).fetchone() == (1, 3)
    assert_statistics_match(conn)


def test_a_repeatable_read_writer_meeting_a_fold_committed_since_its_snapshot_still_writes(
        db_url: str, conn: psycopg.Connection) -> None:
    """Its fold cannot lock the row the other writer deleted, so it adds its change alone; the sums stay right."""
    first = _document(conn, "one", ["Vacuum reclaims storage.", "Indexes help."])
    second = _document(conn, "two", ["Vacuum freezes old rows.", "Indexes help."])
    conn.commit()
    url = psycopg.conninfo.make_conninfo(db_url.replace("postgresql+psycopg://", "postgresql://"))
    with psycopg.connect(url) as a, psycopg.connect(url) as b:
        b.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        b.execute("SELECT count(*) FROM hrag.collection_terms").fetchone()  # b's snapshot, before a's fold
        a.execute("UPDATE hrag.nodes SET content = 'Indexes help vacuum.' WHERE id = %s", (first.ids["one1"],))
        a.execute("SELECT hrag.refresh_document_terms(%s)", (first.document_id,))
        a.commit()  # vacuum's row folded and replaced
        b.execute("UPDATE hrag.nodes SET content = 'Indexes help vacuum.' WHERE id = %s", (second.ids["two1"],))
        b.execute("SELECT hrag.refresh_document_terms(%s)", (second.document_id,))
        b.commit()
    assert conn.execute("SELECT sum(leaves)::int FROM hrag.collection_terms WHERE term = 'vacuum'").fetchone()[0] == 4
    assert_statistics_match(conn)


def test_writers_in_threads_keep_the_sums_right(db_url: str, conn: psycopg.Connection) -> None:
    """Eight writers editing and refreshing their documents at once, many times."""
    docs = [_document(conn, f"d{i}", ["Vacuum reclaims storage.", "Analyze collects statistics."])
            for i in range(8)]
    conn.commit()
    url = psycopg.conninfo.make_conninfo(db_url.replace("postgresql+psycopg://", "postgresql://"))
    errors: list[psycopg.Error] = []

    def write(built: object, rounds: int = 12) -> None:
        try:
            with psycopg.connect(url) as writer:
                for r in range(rounds):
                    words = " ".join(["vacuum", "analyze", "freeze", "tuning"][: 1 + r % 4])
                    writer.execute("UPDATE hrag.nodes SET content = %s WHERE document_id = %s "
                                   "AND embedding IS NOT NULL", (f"Round {r}: {words}.", built.document_id))
                    writer.execute("SELECT hrag.refresh_document_terms(%s)", (built.document_id,))
                    writer.commit()
        except psycopg.Error as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(d,)) for d in docs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    conn.rollback()
    assert_statistics_match(conn)


def test_check_finds_wrong_statistics_and_repair_counts_them_again(conn: psycopg.Connection) -> None:
    _document(conn, "one", ["Vacuum reclaims storage.", "Vacuum and analyze."])
    conn.execute("UPDATE hrag.collection_terms SET leaves = leaves + 5 WHERE term = 'vacuum'")
    conn.execute("INSERT INTO hrag.collection_sizes VALUES ('manuals', 3, 0)")
    problems = dict(conn.execute("SELECT problem, detail FROM hrag.check_integrity()").fetchall())
    assert problems.keys() == {"wrong_term_statistics", "wrong_collection_size"}
    assert "collection manuals" in problems["wrong_term_statistics"]
    assert "vacuum in 7 leaves, its documents say 2" in problems["wrong_term_statistics"]
    repaired = dict(conn.execute("SELECT * FROM hrag.repair_integrity()").fetchall())
    assert repaired["term_statistics"] == 1
    assert_statistics_match(conn)
    # the triggers are back: a later write is counted
    _document(conn, "two", ["Vacuum again."])
    assert_statistics_match(conn)


def test_a_truncate_empties_the_statistics(conn: psycopg.Connection) -> None:
    _document(conn, "one", ["Vacuum reclaims storage."])
    conn.execute(pgsql.SQL("TRUNCATE hrag.documents CASCADE"))
    assert conn.execute("SELECT count(*) FROM hrag.collection_terms").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM hrag.collection_sizes").fetchone()[0] == 0
    assert_statistics_match(conn)
