"""The lexical channel of the candidate stage: a term only one leaf contains is found in every mode.

The vectors are built so that the leaf holding the identifier is (with its
neighbour) the *least* similar of 2,000 leaves to the query, as an
embedding model that blurs identifiers would rank it: the vector stage alone
(search_leaves, even with hundreds of candidates) never reaches it.  Only
the lexical index over the whole collection can.
"""

from __future__ import annotations

import time

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from hrag_pg.queries import Search
from tests.sqltree import DIM, Spec, insert_tree, unit

QUERY = unit({0: 1.0})
IDENTIFIER_TEXT = "Use the option --track-origins=yes together with memcheck to see where values came from."
QUESTION = "What does --track-origins do?"
ORDINARY_TEXT = "Tracking the origin of request {idx} in section {s}."
# An identifier joined by underscores, among leaves that all hold its words: PostgreSQL's
# parser reads `wait_for` as `wait` (and the stop word `for`), which every leaf holds.
UNDERSCORE_TEXT = "Call wait_for(fut, timeout) to bound the wait."
UNDERSCORE_ORDINARY = "Wait for request {idx} to finish in section {s}."
UNDERSCORE_QUESTION = "What does wait_for do?"
IDENTIFIER_CASES = {
    "hyphenated option": (IDENTIFIER_TEXT, ORDINARY_TEXT, QUESTION),
    "underscore identifier": (UNDERSCORE_TEXT, UNDERSCORE_ORDINARY, UNDERSCORE_QUESTION),
}


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


def _haystack(conn: psycopg.Connection, n_leaves: int = 2000, needle_text: str = IDENTIFIER_TEXT,
              ordinary_text: str = ORDINARY_TEXT) -> dict[str, object]:
    """Leaves of common words (by default about tracking and origins), one of which names the identifier."""
    rng = np.random.default_rng(3)
    sections = []
    for s in range(n_leaves // 10):
        leaves = []
        for i in range(10):
            idx = s * 10 + i
            vector = rng.normal(size=DIM).astype(np.float32)
            vector[0] = abs(vector[0]) + 2.0  # every ordinary leaf leans towards the query
            leaves.append(Spec(f"l{idx}", ordinary_text.format(idx=idx, s=s), vector, kind="paragraph"))
        sections.append(Spec(f"s{s}", f"Section {s}", children=leaves))
    # Barely related to the query (cosine 0.05, every other leaf about 0.14): the vector stage's last choice.
    needle = unit({0: 0.05, 5: 0.99875})
    sections.append(Spec("memcheck", "Memcheck options", children=[
        Spec("needle", needle_text, needle, kind="paragraph"),
        Spec("neighbour", "Other memcheck options are listed below.", unit({0: 0.05, 6: 0.99875}), kind="paragraph"),
    ]))
    built = insert_tree(conn, Spec("manual", kind="document", children=sections))
    conn.execute("ANALYZE hrag.nodes")
    return {"needle": built.ids["needle"], "section": built.ids["memcheck"]}


def test_the_vector_stage_alone_never_reaches_the_identifier_leaf(conn: psycopg.Connection) -> None:
    ids = _haystack(conn)
    hits = {r[0] for r in conn.execute("SELECT node_id FROM hrag.search_leaves(%s, 500)", (QUERY,))}
    assert ids["needle"] not in hits


@pytest.mark.parametrize("case", IDENTIFIER_CASES.values(), ids=IDENTIFIER_CASES.keys())
def test_a_unique_identifier_is_found_in_every_mode(conn: psycopg.Connection, case: tuple[str, str, str]) -> None:
    needle_text, ordinary_text, question = case
    ids = _haystack(conn, needle_text=needle_text, ordinary_text=ordinary_text)
    hybrid = [r[0] for r in conn.execute("SELECT node_id FROM hrag.search_hybrid(%s, %s, 12)", (QUERY, question))]
    assert ids["needle"] in hybrid, "candidate stage"
    hits = "(SELECT node_id, score FROM hrag.search_hybrid(%s, %s, 20)) AS h"
    arrays = (f"ARRAY(SELECT node_id FROM {hits} ORDER BY score DESC), "
              f"ARRAY(SELECT score FROM {hits} ORDER BY score DESC)")
    parents = [r[0] for r in conn.execute(
        f"SELECT node_id FROM hrag.parent_child_hits({arrays}, 4, 20)", (QUERY, question, QUERY, question))]
    assert ids["section"] in parents, "parent-child returns the identifier's parent"
    merged = conn.execute(f"SELECT node_id, merged_from FROM hrag.auto_merge_hits({arrays}, 0.5)",
                          (QUERY, question, QUERY, question)).fetchall()
    assert any(ids["needle"] == r[0] or ids["needle"] in r[1] for r in merged), "auto-merge"
    chosen = conn.execute("SELECT node_id, merged_from FROM hrag.retrieve(%s, %s, 2000)", (QUERY, question)).fetchall()
    assert any(ids["needle"] == r[0] or ids["needle"] in r[1] for r in chosen), "retrieve (budget mode)"


def test_an_underscore_identifier_is_one_term_beside_the_words_the_parser_makes_of_it(
    conn: psycopg.Connection,
) -> None:
    terms = conn.execute("SELECT hrag.lexical_terms(%s)",
                         ("wait_for(fut) fails with ERR_STREAM_PREMATURE_CLOSE in _run_once; __init__",)).fetchone()[0]
    assert {"wait_for", "err_stream_premature_close", "run_once"} <= set(terms)
    assert "wait_for" in conn.execute("SELECT hrag.lexical_terms('asyncio.wait_for')").fetchone()[0], "a dotted name"
    # the parser keeps child_process.exec whole (as it would a host name): the name is a term once, not twice
    assert conn.execute("SELECT hrag.lexical_terms('child_process.exec')").fetchone()[0] == ["child_process.exec"]
    assert "child_process" in conn.execute("SELECT hrag.lexical_terms('require(child_process)')").fetchone()[0]
    assert {"wait", "err", "stream", "prematur", "close", "run", "init"} <= set(terms), "the words stay terms"
    assert not any(t.startswith("_") or t.endswith("_") for t in terms), "no bare underscores"


def test_cjk_text_is_matched_by_character_bigrams(conn: psycopg.Connection) -> None:
    built = insert_tree(conn, Spec("規程", kind="document", children=[
        Spec("第8条", "第8条（BYOD）", kind="clause", children=[
            # The vectors favour 8.2 (cosine 0.6 against 0.3), as an English model blind to Japanese might.
            Spec("8.1", "8.1 BYOD端末には、会社が指定するウイルス対策ソフトをインストールする。",
                 unit({0: 0.3, 1: 0.954}), kind="item"),
            Spec("8.2", "8.2 BYOD端末には、画面ロックを設定する。", unit({0: 0.6, 2: 0.8}), kind="item"),
        ]),
    ]))
    rows = conn.execute(
        "SELECT node_id, lexical_score FROM hrag.search_hybrid(%s, %s, 2, NULL, NULL, 0.5)",
        (QUERY, "ウイルス対策ソフトは必要ですか"),
    ).fetchall()
    assert rows[0][0] == built.ids["8.1"], "the bigrams ウイ/イル/ルス/対策/策ソ/ソフ/フト outweigh the vector"
    assert rows[0][1] > 0.9 and rows[1][1] == 0
    assert "対策" in conn.execute("SELECT hrag.lexical_terms('ウイルス対策ソフト')").fetchone()[0]


def _scan_counts(conn: psycopg.Connection) -> tuple[int, int]:
    """Scans of the lexical GIN index, and sequential scans of hrag.nodes (the planner's other way to a term)."""
    conn.execute("SELECT pg_stat_clear_snapshot()")
    row = conn.execute(
        "SELECT (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'nodes_lexical_hashes_idx'), "
        "(SELECT seq_scan FROM pg_stat_user_tables WHERE schemaname = 'hrag' AND relname = 'nodes')"
    ).fetchone()
    assert row is not None
    return row


def _scan_counts_after_flush(conn: psycopg.Connection, before: tuple[int, int]) -> tuple[int, int]:
    """The counts once this session's statistics are flushed (waits up to 5 s for the index count to move)."""
    conn.execute("SELECT pg_stat_force_next_flush()")
    conn.execute("SELECT 1")
    deadline = time.monotonic() + 5
    while _scan_counts(conn)[0] == before[0] and time.monotonic() < deadline:
        time.sleep(0.2)
    return _scan_counts(conn)


def test_the_lexical_channel_reads_its_gin_index_not_the_table(conn: psycopg.Connection) -> None:
    _haystack(conn)
    conn.commit()
    conn.autocommit = True

    before = _scan_counts(conn)
    conn.execute("SELECT * FROM hrag.search_hybrid(%s, %s, 12)", (QUERY, QUESTION)).fetchall()
    after = _scan_counts_after_flush(conn, before)
    assert after[0] > before[0], "the GIN index on lexical_hashes was scanned"
    assert after[1] == before[1], "no sequential scan of hrag.nodes"


def test_ingested_rows_leave_no_pending_list_for_the_lexical_index_to_scan(conn: psycopg.Connection) -> None:
    """GIN's fast update would park new entries in a list every query reads in full until VACUUM merges it.

    gin_clean_pending_list merges that list and returns how many pages it held:
    with the index taking rows directly (revision 0018) there is nothing to merge.
    """
    _haystack(conn, n_leaves=500)
    conn.commit()
    merged = conn.execute("SELECT gin_clean_pending_list('hrag.nodes_lexical_hashes_idx'::regclass)").fetchone()
    assert merged == (0,)


def test_a_question_of_only_common_terms_adds_no_lexical_candidates(conn: psycopg.Connection) -> None:
    """Every term of it is in 2,000 leaves: the GIN index would return rows in no useful order, so it is not read.

    The vector candidates are still rescored by those terms; a question with a rare
    term reads the index once.  Both run before the statistics are flushed, so the
    index scan count says how many of the two read it.
    """
    _haystack(conn)
    conn.commit()
    conn.autocommit = True

    before = _scan_counts(conn)
    common = conn.execute("SELECT node_id, lexical_score FROM hrag.search_hybrid(%s, %s, 12)",
                          (QUERY, "Tracking the origin of requests in sections")).fetchall()
    assert len(common) == 12 and all(score == 1.0 for _, score in common), "rescored by the common terms"
    conn.execute("SELECT * FROM hrag.search_hybrid(%s, %s, 12)", (QUERY, QUESTION)).fetchall()
    after = _scan_counts_after_flush(conn, before)
    assert after[0] - before[0] == 1, "only the question with a rare term read the lexical index"
    assert after[1] == before[1], "and neither question scanned hrag.nodes for lexical candidates"


def test_each_leaf_stores_the_hashes_of_its_terms_in_their_order(conn: psycopg.Connection) -> None:
    """lexical_hashes is generated beside lexical_terms; a node without an embedding has neither."""
    _haystack(conn, 100)
    mismatched = conn.execute(
        "SELECT count(*) FROM hrag.nodes "
        "WHERE lexical_hashes IS DISTINCT FROM hrag.term_hashes(lexical_terms)").fetchone()[0]
    assert mismatched == 0
    leaves, hashed = conn.execute(
        "SELECT count(*) FILTER (WHERE embedding IS NOT NULL), count(lexical_hashes) FROM hrag.nodes").fetchone()
    assert leaves == hashed == 102
    assert conn.execute("SELECT hrag.term_hashes(ARRAY['b', 'a']) = ARRAY[hrag.term_hash('b'), hrag.term_hash('a')], "
                        "hrag.term_hash('a') <> hrag.term_hash('b')").fetchone() == (True, True)


def test_lexical_scores_over_hashes_equal_the_idf_share_of_the_question_terms_each_leaf_holds(
    conn: psycopg.Connection,
) -> None:
    """The oracle compares the texts (as revisions before 0020 did) with the same IDF weights."""
    _haystack(conn, 300)
    question = "Does --track-origins show the origin of a request in a memcheck section?"
    rows = conn.execute("SELECT node_id, lexical_score FROM hrag.search_hybrid(%s, %s, 40)",
                        (QUERY, question)).fetchall()
    expected = dict(conn.execute(
        "WITH w AS (SELECT term, idf FROM hrag._term_weights(hrag.lexical_terms(%s), NULL)) "
        "SELECT n.id, ((SELECT sum(w.idf) FROM w WHERE w.term = ANY (n.lexical_terms)) "
        "              / (SELECT sum(idf) FROM w))::real "
        "  FROM hrag.nodes n WHERE n.id = ANY (%s)",
        (question, [r[0] for r in rows])).fetchall())
    assert len(rows) == 40 and any(score > 0.5 for _, score in rows)
    assert {node: round(score, 5) for node, score in rows} == {
        node: round(expected[node] or 0.0, 5) for node, _ in rows}


def test_statistics_follow_reingestion_and_deletion(conn: psycopg.Connection) -> None:
    ids = _haystack(conn, 100)
    df = "SELECT coalesce(sum(leaves), 0) FROM hrag.document_terms WHERE term = %s"
    assert conn.execute(df, ("track-origin",)).fetchone()[0] == 1
    assert conn.execute(df, ("origin",)).fetchone()[0] == 101
    conn.execute("UPDATE hrag.nodes SET content = 'nothing special' WHERE id = %s", (ids["needle"],))
    document = conn.execute("SELECT document_id FROM hrag.nodes WHERE id = %s", (ids["needle"],)).fetchone()[0]
    conn.execute("SELECT hrag.refresh_document_terms(%s)", (document,))
    assert conn.execute(df, ("track-origin",)).fetchone()[0] == 0
    conn.execute("DELETE FROM hrag.documents WHERE id = %s", (document,))
    assert conn.execute("SELECT count(*) FROM hrag.document_terms").fetchone()[0] == 0


def test_the_default_vector_candidates_are_k_but_at_least_30(conn: psycopg.Connection) -> None:
    """search_hybrid rescores max(k, 30) vector candidates unless told otherwise, as Search.candidate_count says.

    Both question terms are in more than 300 leaves, so there are no lexical
    candidates: only a vector candidate can be returned.  The one leaf holding
    both terms is the 33rd nearest: inside 3 x 12 = 36 candidates (the
    default before revision 0013), outside max(12, 30).
    """
    leaves = []
    for i in range(450):
        words = (["alpha"] if i < 400 else []) + (["omega"] if i >= 100 or i == 32 else [])
        cosine = 0.9 - i * 0.001  # the i-th leaf is the (i + 1)-th nearest
        leaves.append(Spec(f"l{i}", f"Leaf {i}: {' '.join(words)}.",
                           unit({0: cosine, 1 + i % (DIM - 1): float(np.sqrt(1 - cosine**2))}), kind="paragraph"))
    built = insert_tree(conn, Spec("doc", kind="document", children=[Spec("s", "Section", children=leaves)]))
    conn.execute("ANALYZE hrag.nodes")
    both = built.ids["l32"]
    question = "alpha omega"

    def ranked(candidates: int | None) -> list[object]:
        return [r[0] for r in conn.execute(
            "SELECT node_id FROM hrag.search_hybrid(%s, %s, 12, NULL, NULL, 1, %s)", (QUERY, question, candidates))]

    assert Search(query=QUERY, text=question).candidate_count(12) == 30
    assert both not in ranked(None), "the default pool is the 30 nearest leaves"
    assert ranked(None) == ranked(30)
    assert ranked(36)[0] == both, "with 36 candidates the leaf holding both terms is found and ranks first"
