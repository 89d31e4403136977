"""The retrieval functions in SQL, on hand-built trees with exact similarities.

These tests are the specification of the seed's examples: the work-rules
article (small-to-big), Tokyo's wards and the BYOD policy (auto-merging).
"""

from __future__ import annotations

import uuid

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from tests.sqltree import Spec, insert_tree, unit

ARTICLE_4_ITEMS = [
    "1. 会社は、従業員の円滑な業務遂行を支援するため、本条の定めに従い手当を支給する。",
    "2. 正社員に対しては、月額上限20,000円までの通勤手当の実費、および月額10,000円の昼食手当を支給する。",
    "3. 試用期間中の従業員については、通勤手当は全額実費支給の対象とするが、昼食手当の適用は本採用以降とする。",
    "4. 各手当は、毎月25日（休日の場合は前営業日）の給与支払い時に合算して口座振込にて支給する。",
]


@pytest.fixture
def conn(postgresql: psycopg.Connection) -> psycopg.Connection:
    register_vector(postgresql)
    return postgresql


def work_rules() -> Spec:
    return Spec("就業規則", kind="document", children=[
        Spec("第3条", "第3条：勤務時間", kind="clause", children=[
            Spec("3.1", "1. 所定労働時間は1日8時間とする。", {10: 1.0}, kind="item"),
            Spec("3.2", "2. 休憩は60分とする。", {11: 1.0}, kind="item"),
        ]),
        Spec("第4条", "第4条：諸手当および福利厚生", kind="clause", children=[
            Spec(f"4.{i + 1}", text, {i: 1.0}, kind="item") for i, text in enumerate(ARTICLE_4_ITEMS)
        ]),
    ])


def test_probation_question_returns_article_4_with_the_payment_day(conn: psycopg.Connection) -> None:
    built = insert_tree(conn, work_rules())
    query = unit({2: 1.0, 1: 0.3})  # nearest item 3 (probation), then item 2
    rows = conn.execute(
        "SELECT node_id, title, content, matched_children, rank FROM hrag.parent_child(%s, 20, 4)", (query,)
    ).fetchall()
    node_id, title, content, matched, rank = rows[0]
    assert (node_id, title, rank) == (built.ids["第4条"], "第4条", 1)
    assert matched[0] == built.ids["4.3"]
    assert "毎月25日" in content, "the parent's full text includes item 4, the payment day"
    assert content.startswith("第4条：諸手当および福利厚生")
    assert content.split("\n\n")[1:] == ARTICLE_4_ITEMS


def test_node_text_is_own_text_plus_descendants_in_document_order(conn: psycopg.Connection) -> None:
    built = insert_tree(conn, work_rules())
    text = conn.execute("SELECT hrag.node_text(%s)", (built.ids["就業規則"],)).fetchone()[0]
    assert text.index("第3条") < text.index("休憩") < text.index("第4条") < text.index("毎月25日")
    assert conn.execute("SELECT hrag.node_text(%s)", (uuid.uuid4(),)).fetchone() == (None,)


def test_full_text_joins_contents_by_their_separators_and_skips_empty_nodes(conn: psycopg.Connection) -> None:
    """A split line continues without a break, code lines keep single newlines, empty nodes add nothing."""
    built = insert_tree(conn, Spec("doc", kind="document", children=[
        Spec("s", "def f():", kind="section", children=[
            Spec("g", kind="group", children=[
                Spec("p1", "    return (1 +", {0: 1.0}, kind="code"),
                Spec("p2", " 2)", {1: 1.0}, kind="code"),
            ]),
            Spec("p3", "x = 1", {2: 1.0}, kind="code"),
        ]),
    ]))
    separators = {"p1": "\n", "p2": "", "p3": "\n\n\n", "g": "IGNORED"}
    for key, separator in separators.items():
        conn.execute("UPDATE hrag.nodes SET separator = %s WHERE id = %s", (separator, built.ids[key]))
    text_of = lambda key: conn.execute("SELECT hrag.node_text(%s)", (built.ids[key],)).fetchone()[0]  # noqa: E731
    assert text_of("doc") == "def f():\n    return (1 + 2)\n\n\nx = 1"
    assert text_of("g") == "    return (1 + 2)", "a range's first content never carries its separator"
    assert text_of("p2") == " 2)"
    merged = conn.execute("SELECT content FROM hrag.auto_merge_hits(%s::uuid[], %s::real[], 1.0)",
                          ([built.ids["p1"], built.ids["p2"]], [0.9, 0.8])).fetchall()
    assert merged == [("    return (1 + 2)",)], "auto_merge_hits assembles text the same way"


def _one_parent_many_children(n_main: int, others: int) -> Spec:
    main = Spec("A", "A", kind="section", children=[
        Spec(f"A{i}", f"a{i}", {0: 1.0, 1 + i: 0.05}, kind="paragraph") for i in range(n_main)
    ])
    rest = [
        Spec(chr(ord("B") + j), chr(ord("B") + j), kind="section", children=[
            Spec(f"{chr(ord('B') + j)}0", "x", {0: 1.0, 100 + j: 0.5 + 0.1 * j}, kind="paragraph"),
        ])
        for j in range(others)
    ]
    return Spec("doc", kind="document", children=[main, *rest])


def test_a_parent_hit_by_many_children_appears_once_in_first_seen_order(conn: psycopg.Connection) -> None:
    built = insert_tree(conn, _one_parent_many_children(5, 6))
    rows = conn.execute(
        "SELECT title, matched_children FROM hrag.parent_child(%s, 20, 4)", (unit({0: 1.0}),)
    ).fetchall()
    assert [r[0] for r in rows] == ["A", "B", "C", "D"]
    assert len(rows[0][1]) == 5 and set(rows[0][1]) == {built.ids[f"A{i}"] for i in range(5)}


def test_max_parents_are_found_even_when_the_top_children_share_one_parent(conn: psycopg.Connection) -> None:
    insert_tree(conn, _one_parent_many_children(25, 4))
    rows = conn.execute(
        "SELECT title, cardinality(matched_children) FROM hrag.parent_child(%s, 20, 4)", (unit({0: 1.0}),)
    ).fetchall()
    assert [r[0] for r in rows] == ["A", "B", "C", "D"]
    assert rows[0][1] == 20, "only the top 20 children count as matches"


def test_min_score_stops_the_walk(conn: psycopg.Connection) -> None:
    insert_tree(conn, work_rules())
    rows = conn.execute(
        "SELECT title FROM hrag.parent_child(%s, 20, 4, min_score => 0.9)", (unit({2: 1.0}),)
    ).fetchall()
    assert rows == [("第4条",)]


# ----------------------------------------------------------------- auto-merge

def tokyo() -> Spec:
    wards = ["千代田区", "中央区", "港区", "新宿区"]
    return Spec("東京都", kind="document", children=[
        Spec("都心", "都心4区", kind="section", children=[
            Spec(w, f"{w}の概要", {i: 1.0}, kind="paragraph") for i, w in enumerate(wards)
        ]),
        Spec("多摩", "多摩地域", kind="section", children=[
            Spec("八王子市", "八王子市の概要", {20: 1.0}, kind="paragraph"),
        ]),
        Spec("島しょ", "島しょ地域", kind="section", children=[
            Spec("大島町", "大島町の概要", {21: 1.0}, kind="paragraph"),
        ]),
    ])


def _merge(conn: psycopg.Connection, ids: list[uuid.UUID], scores: list[float], threshold: float = 0.5):
    return conn.execute(
        "SELECT node_id, title, score, merged_from, hit_ratio, rank "
        "FROM hrag.auto_merge_hits(%s, %s::real[], %s::real)",
        (ids, scores, threshold),
    ).fetchall()


def test_one_of_four_districts_hit_stays_a_leaf(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, tokyo())
    rows = _merge(conn, [b.ids["港区"]], [0.9])
    assert [(r[1], r[3], r[4]) for r in rows] == [("港区", [], None)]


def test_three_of_four_districts_merge_into_the_parent(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, tokyo())
    hits = [b.ids["千代田区"], b.ids["中央区"], b.ids["港区"]]
    rows = _merge(conn, hits, [0.7, 0.9, 0.8])
    assert len(rows) == 1
    _, title, score, merged_from, ratio, _ = rows[0]
    assert title == "都心" and ratio == pytest.approx(0.75)
    assert score == pytest.approx(0.9), "a merged node scores as its best hit"
    assert merged_from == [b.ids["中央区"], b.ids["港区"], b.ids["千代田区"]]


def test_two_of_four_at_threshold_one_half_merge_the_boundary_is_inclusive(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, tokyo())
    rows = _merge(conn, [b.ids["千代田区"], b.ids["港区"]], [0.8, 0.7], 0.5)
    assert [(r[1], r[4]) for r in rows] == [("都心", 0.5)]
    rows = _merge(conn, [b.ids["千代田区"], b.ids["港区"]], [0.8, 0.7], 0.51)
    assert [r[1] for r in rows] == ["千代田区", "港区"]


def test_auto_merge_searches_then_merges_in_one_call(conn: psycopg.Connection) -> None:
    insert_tree(conn, tokyo())
    query = unit({0: 1.0, 1: 1.0, 2: 1.0})
    rows = conn.execute(
        "SELECT title, cardinality(merged_from), hit_ratio, content FROM hrag.auto_merge(%s, 3, 0.5)", (query,)
    ).fetchall()
    assert rows[0][:3] == ("都心", 3, 0.75)
    assert "新宿区の概要" in rows[0][3], "the merged parent's full text includes the unhit sibling"


def byod() -> Spec:
    return Spec("情報セキュリティ管理規程", kind="document", children=[
        Spec("第1章", "第1章 総則", kind="chapter", children=[
            Spec("第1条", "第1条（目的）", kind="clause", children=[
                Spec("1.1", "本規程は情報資産を保護することを目的とする。", {50: 1.0}, kind="item"),
            ]),
        ]),
        Spec("第2章", "第2章 情報機器の管理", kind="chapter", children=[
            Spec("第7条", "第7条（貸与端末）", kind="clause", children=[
                Spec("7.1", "7.1 貸与端末の持ち出しは許可制とする。", {40: 1.0}, kind="item"),
            ]),
            Spec("第8条", "第8条（BYOD）", kind="clause", children=[
                Spec("8.1", "8.1 私物端末にはウイルス対策ソフトを導入し最新に保つ。", {0: 1.0}, kind="item"),
                Spec("8.2", "8.2 6桁以上のパスコードを設定する。", {1: 1.0}, kind="item"),
                Spec("8.3", "8.3 紛失時は24時間以内に報告する。", {2: 1.0}, kind="item"),
            ]),
            Spec("第9条", "第9条（記録媒体）", kind="clause", children=[
                Spec("9.1", "9.1 USBメモリは暗号化する。", {41: 1.0}, kind="item"),
            ]),
            Spec("第10条", "第10条（廃棄）", kind="clause", children=[
                Spec("10.1", "10.1 廃棄時はデータを消去する。", {42: 1.0}, kind="item"),
            ]),
        ]),
        Spec("第3章", "第3章 教育", kind="chapter", children=[
            Spec("第11条", "第11条（研修）", kind="clause", children=[
                Spec("11.1", "11.1 年1回研修を受講する。", {43: 1.0}, kind="item"),
            ]),
        ]),
    ])


def test_a_narrow_antivirus_question_keeps_8_1_alone(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, byod())
    rows = conn.execute("SELECT node_id FROM hrag.auto_merge(%s, 1)", (unit({0: 1.0}),)).fetchall()
    assert rows == [(b.ids["8.1"],)]


def test_all_byod_obligations_merge_into_article_8(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, byod())
    rows = conn.execute(
        "SELECT node_id, merged_from FROM hrag.auto_merge(%s, 3)", (unit({0: 1.0, 1: 1.0, 2: 1.0}),)
    ).fetchall()
    assert [r[0] for r in rows] == [b.ids["第8条"]]
    assert set(rows[0][1]) == {b.ids["8.1"], b.ids["8.2"], b.ids["8.3"]}


def test_merging_continues_upward_to_the_chapter(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, byod())
    hits = [b.ids[k] for k in ("8.1", "8.2", "8.3", "7.1")]
    rows = _merge(conn, hits, [0.9, 0.8, 0.7, 0.6])
    assert [(r[1], r[4]) for r in rows] == [("第2章", 0.5)], "2 of 4 articles covered"
    assert set(rows[0][3]) == set(hits)


def test_a_result_never_holds_a_node_and_its_ancestor(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, byod())
    rows = _merge(conn, [b.ids["第8条"], b.ids["8.1"]], [0.5, 0.9], 0.9)
    assert [(r[1], r[2], r[3]) for r in rows] == [("第8条", pytest.approx(0.9), [b.ids["8.1"]])]


def test_unknown_and_duplicate_ids_are_handled_safely(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, tokyo())
    rows = _merge(conn, [uuid.uuid4(), b.ids["港区"], b.ids["港区"]], [0.99, 0.5, 0.7], 0.9)
    assert [(r[1], r[2]) for r in rows] == [("港区", pytest.approx(0.7))]
    assert _merge(conn, [uuid.uuid4()], [0.5]) == []


# ------------------------------------------------------------ arguments

@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("SELECT * FROM hrag.search_leaves(%(q)s, 0)", 'argument "k" must be between 1 and 1000, got 0'),
        ("SELECT * FROM hrag.search_leaves(%(q)s, -5)", 'argument "k" must be between 1 and 1000, got -5'),
        ("SELECT * FROM hrag.search_leaves(%(q)s, 100000)", 'argument "k" must be between 1 and 1000'),
        ("SELECT * FROM hrag.parent_child(%(q)s, 20, 0)", 'argument "max_parents" must be between'),
        ("SELECT * FROM hrag.parent_child(%(q)s, 0)", 'argument "top_k_children" must be between'),
        ("SELECT * FROM hrag.auto_merge(%(q)s, 12, 0)", 'argument "merge_threshold" must be in \\(0, 1\\]'),
        ("SELECT * FROM hrag.auto_merge(%(q)s, 12, 1.5)", 'argument "merge_threshold" must be in \\(0, 1\\]'),
        ("SELECT * FROM hrag.search_leaves(NULL::vector)", 'argument "query" must not be NULL'),
        ("SELECT * FROM hrag.search_leaves('[1,2,3]'::vector)", 'has 3 dimensions, but this installation stores 384'),
        ("SELECT * FROM hrag.search_leaves(%(zero)s)", "zero vector"),
        ("SELECT * FROM hrag.search_leaves(%(q)s, 5, NULL, '[1]')", 'argument "filter" must be a JSON object'),
        ("SELECT * FROM hrag.auto_merge_hits(ARRAY[gen_random_uuid()], ARRAY[0.1, 0.2]::real[])",
         r'"node_ids" \(1 elements\) and "scores" \(2 elements\) must have the same length'),
    ],
)
def test_bad_arguments_are_refused_with_the_argument_named(conn: psycopg.Connection, call: str, message: str) -> None:
    with pytest.raises(psycopg.Error, match=message):
        conn.execute(call, {"q": unit({0: 1.0}), "zero": np.zeros(384, dtype=np.float32)})


def grouped_section() -> Spec:
    return Spec("manual", kind="document", children=[
        Spec("Backups", "Backups", kind="section", children=[
            Spec("g1", kind="group", children=[
                Spec("p1", "Snapshots run every six hours.", {0: 1.0}, kind="paragraph"),
                Spec("p2", "Eight snapshots are kept.", {1: 1.0}, kind="paragraph"),
            ]),
            Spec("g2", kind="group", children=[
                Spec("p3", "Restores need the snapshot label.", {2: 1.0}, kind="paragraph"),
                Spec("p4", "Off-site copies go to object storage.", {3: 1.0}, kind="paragraph"),
            ]),
        ]),
        Spec("Security", "Security", kind="section", children=[
            Spec("p5", "TLS is on by default.", {4: 1.0}, kind="paragraph"),
        ]),
        Spec("Monitoring", "Monitoring", kind="section", children=[
            Spec("p6", "Metrics are on port 7480.", {5: 1.0}, kind="paragraph"),
        ]),
    ])


def test_parent_child_expands_through_a_group_to_the_section(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, grouped_section())
    rows = conn.execute("SELECT node_id, content, matched_children FROM hrag.parent_child(%s, 2, 1)",
                        (unit({0: 1.0, 2: 0.5}),)).fetchall()
    assert rows[0][0] == b.ids["Backups"], "the group is skipped: the context is the whole section"
    assert "Off-site copies" in rows[0][1]
    assert rows[0][2] == [b.ids["p1"], b.ids["p3"]]
    hits = conn.execute("SELECT node_id FROM hrag.parent_child_hits(%s, %s::real[], 1)",
                        ([b.ids["p2"]], [0.9])).fetchall()
    assert hits == [(b.ids["Backups"],)]


def test_two_hits_in_a_group_merge_it_and_groups_merge_the_section(conn: psycopg.Connection) -> None:
    b = insert_tree(conn, grouped_section())
    rows = _merge(conn, [b.ids["p1"], b.ids["p2"]], [0.9, 0.8])
    assert [r[1] for r in rows] == ["Backups"], "g1 (2/2) merges, then 1 of 2 groups merges the section"
