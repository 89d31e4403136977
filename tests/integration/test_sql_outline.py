"""hrag.outline, hrag.children and hrag.node: the heading tree as a map, from psql.

A small nested fixture built in SQL (tests/sqltree.py): a guide with an
untitled intro paragraph, two chapters, sections four levels deep, a titled
function leaf and a markup leaf; a second document in the same collection
and a document of the same name in another collection.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from tests.sqltree import Built, Spec, insert_tree


def para(key: str, text: str) -> Spec:
    return Spec(key, text, {1: 1.0}, kind="paragraph")


GUIDE = Spec("guide", "# Guide", kind="document", children=[
    para("intro", "intro words here"),
    Spec("ch1", "## One", children=[
        para("p1", "one two three"),
        Spec("s11", "### One one", children=[
            Spec("s111", "#### deep", children=[
                Spec("s1111", "##### deeper", children=[para("p4", "four words in here")]),
            ]),
            para("p2", "five six"),
        ]),
        Spec("nav", ".. toctree::", kind="markup"),
    ]),
    Spec("ch2", "## Two", children=[
        para("p3", "seven eight nine ten"),
        Spec("fn", "def fn(): pass", {2: 1.0}, kind="function"),
    ]),
])

#: The guide's outline at the default max_depth 3: the root, sections and the titled function leaf,
#: in document order; not the untitled paragraphs, not the markup leaf, not s1111 (depth 4).
GUIDE_OUTLINE = ["guide", "ch1", "s11", "s111", "ch2", "fn"]


@pytest.fixture
def trees(sql: psycopg.Connection) -> dict[str, Built]:
    built = {
        "guide": insert_tree(sql, GUIDE, source="guide.md", collection="manuals"),
        "apple": insert_tree(sql, Spec("apple", "# Apple", kind="document", children=[
            Spec("a1", "## Apple one", children=[para("ap", "apple text")])]), source="apple.md",
            collection="manuals"),
        "other": insert_tree(sql, Spec("other", "# Other guide", kind="document", children=[
            para("op", "other text")]), source="guide.md", collection="other"),
    }
    # Paragraphs have no title (as ingestion stores them); sqltree titles every node by its key.
    sql.execute("UPDATE hrag.nodes SET title = NULL WHERE kind = 'paragraph'")
    return built


def keys(built: dict[str, Built], rows: list[tuple]) -> list[str]:
    by_id = {i: k for b in built.values() for k, i in b.ids.items()}
    return [by_id[r[0]] for r in rows]


def outline(sql: psycopg.Connection, *args: object, **kwargs: object) -> list[tuple]:
    named = ", ".join(f"{k} => %({k})s" for k in kwargs)
    placeholders = ", ".join(["%s"] * len(args))
    if args:
        statement = f"SELECT * FROM hrag.outline({placeholders})"
        return sql.execute(statement, args).fetchall()
    return sql.execute(f"SELECT * FROM hrag.outline({named})", kwargs).fetchall()


def test_outline_lists_sections_in_document_order_down_to_max_depth(
    sql: psycopg.Connection, trees: dict[str, Built]
) -> None:
    rows = outline(sql, source="guide.md", collection="manuals")
    assert keys(trees, rows) == GUIDE_OUTLINE
    by_key = dict(zip(keys(trees, rows), rows, strict=True))
    guide = trees["guide"]
    node_id, document_id, source, collection, depth, heading_path, title, kind, tokens, children = by_key["s11"]
    assert (node_id, document_id, source, collection) == (guide.ids["s11"], guide.document_id, "guide.md", "manuals")
    assert (depth, heading_path, title, kind) == (2, ["guide", "ch1"], "s11", "section")
    # the subtree's tokens: "### One one" 3 + "#### deep" 2 + "##### deeper" 2 + "four words in here" 4 + "five six" 2
    assert (tokens, children) == (13, 2)
    # the root: every word of the guide; its child count includes the untitled intro
    assert by_key["guide"][8:] == (2 + 3 + 2 + 3 + 3 + 2 + 2 + 4 + 2 + 2 + 2 + 4 + 3, 3)
    assert by_key["fn"][7:] == ("function", 3, 0)


def test_max_depth_cuts_the_tree_and_zero_lists_the_roots(sql: psycopg.Connection, trees: dict[str, Built]) -> None:
    assert keys(trees, outline(sql, source="guide.md", collection="manuals", max_depth=4)) == [
        "guide", "ch1", "s11", "s111", "s1111", "ch2", "fn"]
    assert keys(trees, outline(sql, source="guide.md", collection="manuals", max_depth=1)) == ["guide", "ch1", "ch2"]
    assert keys(trees, outline(sql, max_depth=0)) == ["apple", "guide", "other"]


def test_outline_of_a_collection_orders_documents_by_source_and_of_all_by_source_then_collection(
    sql: psycopg.Connection, trees: dict[str, Built]
) -> None:
    assert keys(trees, outline(sql, collection="manuals")) == ["apple", "a1", *GUIDE_OUTLINE]
    assert keys(trees, outline(sql, collection="other")) == ["other"]
    assert keys(trees, outline(sql)) == ["apple", "a1", *GUIDE_OUTLINE, "other"]
    assert outline(sql, collection="nothing-here") == []
    assert keys(trees, outline(sql, "other", "guide.md", 3)) == ["other"]  # positional, as from psql


@pytest.mark.parametrize(("call", "message"), [
    ("SELECT * FROM hrag.outline(max_depth => -1)", 'argument "max_depth" must be between 0 and 100, got -1'),
    ("SELECT * FROM hrag.outline(max_depth => 101)", 'argument "max_depth" must be between 0 and 100, got 101'),
    ("SELECT * FROM hrag.outline(max_depth => NULL)", 'argument "max_depth" must be between 0 and 100, got NULL'),
    ("SELECT * FROM hrag.outline(source => 'missing.md')", """argument "source": no document 'missing.md' is stored"""),
    ("SELECT * FROM hrag.outline('other', 'apple.md')",
     """argument "source": no document 'apple.md' is stored in collection 'other'"""),
    ("SELECT * FROM hrag.outline(source => 'guide.md')",
     """argument "source": 'guide.md' is stored in collections manuals, other; pass "collection" to choose one"""),
])
def test_bad_arguments_are_refused_by_name(
    sql: psycopg.Connection, trees: dict[str, Built], call: str, message: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue) as raised:
        sql.execute(call)
    assert raised.value.diag.message_primary == f"hrag: {message}"


def test_children_expand_a_node_with_its_paragraphs_in_order_and_without_markup(
    sql: psycopg.Connection, trees: dict[str, Built]
) -> None:
    guide = trees["guide"].ids

    def children(key: str) -> list[tuple]:
        return sql.execute("SELECT * FROM hrag.children(%s)", (guide[key],)).fetchall()

    assert keys(trees, children("guide")) == ["intro", "ch1", "ch2"]
    assert keys(trees, children("ch1")) == ["p1", "s11"]  # not the markup leaf nav
    rows = children("ch2")
    assert keys(trees, rows) == ["p3", "fn"]
    assert rows[0][1:] == (trees["guide"].document_id, "guide.md", "manuals", 2, ["guide", "ch2"], None,
                           "paragraph", 4, 0)
    assert children("p3") == []
    assert sql.execute("SELECT * FROM hrag.children(%s)", (uuid.uuid4(),)).fetchall() == []
    assert sql.execute("SELECT * FROM hrag.children(NULL)").fetchall() == []


def test_node_reads_one_node_with_its_place_and_full_text(sql: psycopg.Connection, trees: dict[str, Built]) -> None:
    guide = trees["guide"]
    row = sql.execute("SELECT * FROM hrag.node(%s)", (guide.ids["ch2"],)).fetchone()
    assert row is not None
    assert row[:10] == (guide.ids["ch2"], guide.document_id, "guide.md", "manuals", 1, ["guide"], "ch2", "section",
                        9, 2)
    assert row[10] == guide.ids["guide"]
    assert row[11] == sql.execute("SELECT hrag.node_text(%s)", (guide.ids["ch2"],)).fetchone()[0]
    assert row[11] == "## Two\n\nseven eight nine ten\n\ndef fn(): pass"
    assert sql.execute("SELECT * FROM hrag.node(%s)", (uuid.uuid4(),)).fetchall() == []
