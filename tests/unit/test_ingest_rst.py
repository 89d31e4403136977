from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import MARKUP_KIND
from hrag_pg.ingest.tree_helpers import normalise_text

from .ingest_checks import FIXTURES, assert_leaves_nonempty, find


def manual():
    text = (FIXTURES / "guide.rst").read_text(encoding="utf-8")
    return text, parse_rst(text, "guide.rst")


def leaves_of(tree, key):
    return [(leaf.kind, leaf.content) for leaf in find(tree, key).children if leaf.kind != "section"]


def test_titles_nest_by_the_order_in_which_their_adornment_style_first_appears() -> None:
    _, tree = manual()
    levels = {node.key: node.metadata["level"] for node, _ in tree.root.walk() if node.kind == "section"}
    # overlined "=" first, then underlined "=", "-", "~": four styles, four levels
    assert levels == {"hrag-pg manual": 1, "Install": 2, "Requirements": 3, "Checking pgvector": 4,
                      "Configuration": 2}
    assert find(tree, "Checking pgvector") in find(tree, "Requirements").children
    assert find(tree, "Configuration") in find(tree, "hrag-pg manual").children


def test_a_title_is_its_adornment_lines_as_written_with_the_text_as_title() -> None:
    _, tree = manual()
    install = find(tree, "Install")
    assert (install.content, install.title) == ("Install\n=======", "Install")
    assert find(tree, "hrag-pg manual").content == "================\n hrag-pg manual\n================"
    assert tree.title == "hrag-pg manual"
    assert parse_rst("One\n===\n\nbody\n\nTwo\n===\n\nbody", "x").title is None  # two top-level parts
    assert parse_rst("Text\n====\n\nbody", "x", title="Given").title == "Given"


def test_a_paragraph_ending_in_double_colon_introduces_a_literal_code_leaf() -> None:
    _, tree = manual()
    install = leaves_of(tree, "Install")
    assert install[:2] == [
        ("paragraph", "Install the package, then run the migrations::"),
        ("code", "    pip install hrag-pg\n    hrag migrate"),
    ]
    # a lone "::" only introduces its block: no leaf of its own
    assert leaves_of(tree, "Configuration")[-1] == ("code", "    SET hrag.auto_floor = 0.5;")


def test_code_directives_are_code_with_their_language_and_other_directives_are_paragraphs() -> None:
    _, tree = manual()
    requirements = find(tree, "Requirements").children
    code = requirements[0]
    assert (code.kind, code.metadata) == ("code", {"language": "sql"})
    assert code.content == ".. code-block:: sql\n\n   CREATE EXTENSION vector;"
    assert (requirements[1].kind, requirements[1].content) == (
        "paragraph", ".. note:: pgvector 0.8 or newer\n   is needed for iterative scans.")


def test_list_items_keep_their_continuation_lines() -> None:
    _, tree = manual()
    assert [content for kind, content in leaves_of(tree, "Install") if kind == "item"] == [
        "- the embedded server needs no setup",
        "- another server is named by\n  ``HRAG_DATABASE_URL``",
    ]


def test_simple_tables_with_blank_rows_and_grid_tables_are_one_table_leaf_each() -> None:
    _, tree = manual()
    (simple,) = [c for k, c in leaves_of(tree, "Checking pgvector") if k == "table"]
    assert simple.startswith("=========  ========\nsetting") and simple.endswith("iterative  off\n=========  ========")
    (grid,) = [c for k, c in leaves_of(tree, "Configuration") if k == "table"]
    assert grid.startswith("+----------+") and grid.endswith("+----------+---------+")


def test_comments_targets_transitions_and_navigation_are_no_leaves_but_no_text_is_lost() -> None:
    text, tree = manual()
    contents = [leaf.content for leaf in tree.root.leaves()]
    assert not any("This comment" in c or ".. contents::" in c or c == "----------" for c in contents)
    # markup before the first node and after the last one has no separator to live in: it is a
    # markup leaf, the last one of the root (it belongs to no section), and neither is searched
    first, last = tree.root.children[0], tree.root.children[-1]
    assert (first.kind, first.content.splitlines()[0]) == (MARKUP_KIND, ".. image:: banner.svg")
    assert (last.kind, last.content) == (MARKUP_KIND, ".. _hrag-pg: https://example.org/hrag-pg\n"
                                                      ".. |version| replace:: 1.0")
    flat = prepare_tree(parse_rst(text, "guide.rst"), IngestOptions(), counter=ApproximateTokenCounter())
    assert [(n.kind, n.embed_text) for n in flat.nodes if n.kind == MARKUP_KIND] == [(MARKUP_KIND, None)] * 2
    assert tree.root.full_text() == normalise_text(text).strip()
    assert_leaves_nonempty(tree)


def test_sphinx_file_metadata_before_the_first_title_is_markup_and_after_it_text() -> None:
    text = ":orphan:\n\n.. _install:\n\nInstall\n=======\n\n:tocdepth: 2\n\nRun it."
    tree = parse_rst(text, "install.rst")
    assert [(c.kind, c.content) for c in tree.root.children[:1]] == [(MARKUP_KIND, ":orphan:")]
    section = find(tree, "Install")
    assert section.separator == "\n\n.. _install:\n\n"  # between two nodes: the next one's separator
    assert [(c.kind, c.content) for c in section.children] == [("paragraph", ":tocdepth: 2"), ("paragraph", "Run it.")]
    assert tree.root.full_text() == text


def test_a_line_underlined_after_a_paragraph_line_is_not_a_title() -> None:
    tree = parse_rst("Some text\nmore text\n---------\n\nTitle\n-----\n\nbody", "x")
    assert [node.key for node, _ in tree.root.walk() if node.kind == "section"] == ["Title"]


_LINE = st.sampled_from([
    "", "", "Title", "=====", "-----", "~~~~~", "text line", "  indented", "- item", "1. item", "::",
    "Para::", ".. note:: n", ".. code-block:: py", ".. _t: u", "..", "   body", "+--+--+", "==  ==", "| a |",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=30))
def test_any_text_is_kept_whole_and_never_yields_an_empty_leaf(lines: list[str]) -> None:
    text = "\n".join(lines)
    tree = parse_rst(text, "x")
    assert tree.root.full_text() == text.strip()
    for leaf in tree.root.leaves():
        assert leaf.kind in ("section", "document") or leaf.content.strip()


def test_a_string_with_format_rst_is_read_like_an_rst_file() -> None:
    from hrag_pg.ingest.loaders import load_document
    from hrag_pg.ingest.text import load_text

    text, _ = manual()
    from_string = load_text(text, source="guide.rst", format="rst")
    from_file = load_document(FIXTURES / "guide.rst", source="guide.rst")
    assert from_string.root == from_file.root
    assert from_string.metadata == from_file.metadata == {"strategy": "headings", "file_type": "rst"}


def test_a_bullet_or_a_doctest_line_over_a_rule_is_not_a_title() -> None:
    text = '- item\n------\n\n>>> print("-" * 8)\n--------\n\nSection\n=======\n\nbody'
    sections = [(n.title, n.metadata["level"]) for n, _ in parse_rst(text, "x").root.walk() if n.kind == "section"]
    assert sections == [("Section", 1)]


def test_titles_of_one_or_two_characters_take_a_short_underline() -> None:
    sections = [n.title for n, _ in parse_rst("if\n--\n\nbody\n\nC#\n--\n\nmore", "x").root.walk()
                if n.kind == "section"]
    assert sections == ["if", "C#"]


def test_content_under_only_an_empty_comment_or_an_indented_directive_stays_searchable() -> None:
    def leaves(text: str) -> list[tuple[str, str]]:
        return [(leaf.kind, leaf.content) for leaf in parse_rst(text, "x").root.leaves()]

    assert ("paragraph", ".. only:: html\n\n   Configure pgvector first.") in leaves(
        "Title\n=====\n\n.. only:: html\n\n   Configure pgvector first.\n\nEnd.\n")
    # ".." alone ends the list; the indented block after the blank line is a block quote, not comment
    assert ("paragraph", "    Quoted text.") in leaves("Title\n=====\n\n- item\n\n..\n\n    Quoted text.\n\nEnd.\n")
    indented = leaves("term\n    Description.\n\n    .. code-block:: sh\n\n        run it\n\nEnd.\n")
    assert ("code", "    .. code-block:: sh\n\n        run it") in indented


def test_a_simple_table_without_its_closing_border_does_not_swallow_the_next_section() -> None:
    text = "T\n===\n\n=====  =====\nA      B\n=====  =====\n1      2\n\nPara one.\n\nSub\n---\n\nbody\n"
    assert [n.title for n, _ in parse_rst(text, "x").root.walk() if n.kind == "section"] == ["T", "Sub"]


def test_a_nodes_stored_size_counts_the_markup_kept_between_its_texts() -> None:
    # Retrieval returns a section with the label target between its paragraphs, so the
    # budget must count it too (it was left out: an auto-mode context went over its budget).
    from hrag_pg.ingest.flatten import flatten
    from hrag_pg.ingest.tokens import ApproximateTokenCounter

    counter = ApproximateTokenCounter()
    text = ("Guide\n=====\n\nFirst paragraph here.\n\n.. _a-rather-long-label-target-name:\n\n"
            ".. include:: ../CHANGES.rst\n\nSecond paragraph after the markup.\n")
    doc = flatten(parse_rst(text, "guide.rst"), counter=counter)
    texts = [n for n in doc.nodes if n.content]
    markup = [n.separator for n in texts if n.separator.strip()]
    assert markup and ".. _a-rather-long-label-target-name:" in markup[0]
    root = doc.nodes[0]
    assert root.subtree_tokens == sum(n.token_count for n in texts) + sum(counter.count(m) for m in markup)
    assert root.subtree_tokens >= counter.count(text) - 2  # (rounding: each part is rounded up alone)
