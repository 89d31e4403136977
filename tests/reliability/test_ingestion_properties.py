"""Round trip: ``node_text(root)`` is the document, exactly, for every strategy and child strategy.

Generated documents (see :mod:`tests.reliability.roundtrip_cases`) of every
kind — Markdown, reStructuredText, clause documents, Python modules, unstructured text in
windows, pages separated by form feeds, HTML — are refined with generated
options (every child strategy, budgets small enough to split long lines,
parents and wide sections) and then:

* before the database: the tree's full text and the flattened rows, joined
  by the rule ``hrag.node_text`` implements (re-implemented in the test),
  equal the document after the normalisation docs/guarantees.md states (BOM, line ends, the
  document's outer whitespace) and nothing else; every node's own range is a
  piece of it;
* in the database: ``hrag.node_text`` of the root is that same text, and of
  every node the join of its stored range; every node hangs below the root,
  child counts are real; re-ingesting changes nothing;
* ids, before and in the database, are uuid5 of collection, source and the
  structural path, recomputed by the test (not by the code under test);
* a document of markup alone (link definitions, rST targets) has nothing to
  search: it is refused with a clear error and nothing is stored.
"""

from __future__ import annotations

import ast
import itertools
import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hrag_pg.api import HRAG
from hrag_pg.errors import IngestError
from hrag_pg.ingest.code import parse_python
from hrag_pg.ingest.flatten import FlatDocument
from hrag_pg.ingest.loaders import load_document
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree, DraftNode
from tests.reliability.roundtrip_cases import (
    Case,
    clause_cases,
    code_cases,
    expected_ids,
    html_cases,
    markdown_cases,
    normalised,
    options,
    pages_cases,
    rst_cases,
    text_of_rows,
    window_cases,
)

COLLECTION = "roundtrip"
_sources = itertools.count()


def _check_rows(case: Case, doc: FlatDocument) -> None:
    rows = [(n.content, n.separator) for n in doc.nodes]
    assert text_of_rows(rows) == case.expected
    for n in doc.nodes:  # every node's own text is a piece of the document
        assert text_of_rows(rows[n.seq:n.subtree_end + 1]) in case.expected, f"{n.kind} {n.title!r}"


def only_markup(root: DraftNode) -> bool:
    """Whether the parsed document has no leaf to search (every leaf below the root is markup)."""
    return all(leaf.kind == MARKUP_KIND for leaf in root.leaves() if leaf is not root)


NOTHING_TO_SEARCH = "yields no leaves to search"


def check_before_the_database(case: Case, opts: IngestOptions) -> None:
    source = f"{case.kind}-{next(_sources)}"
    tree = case.parse(case.text, source)
    if only_markup(tree.root):
        assert tree.root.full_text() == case.expected
        with pytest.raises(IngestError, match=NOTHING_TO_SEARCH):
            prepare_tree(tree, opts, collection=COLLECTION, counter=ApproximateTokenCounter())
        return
    doc = prepare_tree(tree, opts, collection=COLLECTION, counter=ApproximateTokenCounter())
    assert tree.root.full_text() == case.expected
    _check_rows(case, doc)
    assert [n.id for n in doc.nodes] == expected_ids(tree.root, COLLECTION, source)


PURE = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


@PURE
@given(case=markdown_cases(), opts=options)
def test_markdown_round_trips_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


_RST_MARKUP_AT_BOTH_ENDS = ".. image:: a.png\n\nTitle\n=====\n\nBody::\n\n    code\n\n.. _t: https://example.org"


@PURE
@given(case=rst_cases(), opts=options)
@example(case=Case("rst", _RST_MARKUP_AT_BOTH_ENDS, _RST_MARKUP_AT_BOTH_ENDS, parse_rst), opts=IngestOptions())
def test_restructured_text_round_trips_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


@PURE
@given(case=clause_cases(), opts=options)
def test_clause_documents_round_trip_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


@PURE
@given(case=code_cases(), opts=options)
def test_python_modules_round_trip_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


@PURE
@given(case=window_cases(), opts=options)
def test_window_text_round_trips_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


@PURE
@given(case=pages_cases(), opts=options)
def test_paged_text_round_trips_exactly_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


@PURE
@given(case=html_cases(), opts=options)
def test_html_round_trips_to_its_extracted_text_before_the_database(case: Case, opts: IngestOptions) -> None:
    check_before_the_database(case, opts)


# ------------------------------------------------------------- the database

def ingest_and_check(hrag: HRAG, sql: psycopg.Connection, case: Case, opts: IngestOptions) -> None:
    source = f"property/{case.kind}-{next(_sources)}"
    tree = case.parse(case.text, source)
    if only_markup(tree.root):
        with pytest.raises(IngestError, match=NOTHING_TO_SEARCH):
            hrag.ingest_tree(tree, collection=COLLECTION, options=opts)
        assert sql.execute("SELECT count(*) FROM hrag.documents WHERE source = %s", (source,)).fetchone()[0] == 0
        return
    result = hrag.ingest_tree(tree, collection=COLLECTION, options=opts)  # refines ``tree`` in place
    assert result.status == "created"
    doc_id = result.document_id
    stored = sql.execute(
        "SELECT id, content, separator, seq, subtree_end, hrag.node_text(id) FROM hrag.nodes "
        "WHERE document_id = %s ORDER BY seq", (doc_id,)).fetchall()

    # 1. The root's text is the document; every node's text is the join of its range.
    assert stored[0][5] == case.expected
    rows = [(content, separator) for _, content, separator, *_ in stored]
    for node_id, _, _, seq, end, text in stored:
        assert text == text_of_rows(rows[seq:end + 1]), f"node_text of node {node_id} (seq {seq})"

    # 2. Ids are the structural ones, in pre-order.
    assert [r[0] for r in stored] == expected_ids(tree.root, COLLECTION, source)

    # 3. Every node hangs below the root; child_count is the real number of children.
    reachable = sql.execute(
        """
        WITH RECURSIVE below(id) AS (
            SELECT %(root)s::uuid
            UNION ALL
            SELECT n.id FROM hrag.nodes n JOIN below b ON n.parent_id = b.id
        )
        SELECT count(*) FROM below
        """,
        {"root": stored[0][0]},
    ).fetchone()[0]
    assert reachable == len(stored) == result.nodes
    assert sql.execute(
        "SELECT count(*) FROM hrag.nodes n WHERE n.document_id = %s "
        "AND n.child_count <> (SELECT count(*) FROM hrag.nodes c WHERE c.parent_id = n.id)",
        (doc_id,),
    ).fetchone()[0] == 0

    # 4. Same text, same rows: re-ingesting is a no-op.
    again = hrag.ingest_tree(case.parse(case.text, source), collection=COLLECTION, options=opts)
    assert (again.status, again.document_id, again.embedded) == ("unchanged", doc_id, 0)


DB = settings(max_examples=12, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@DB
@given(case=st.one_of(markdown_cases(), clause_cases(), rst_cases()), opts=options)
def test_markdown_clauses_and_restructured_text_round_trip_through_the_database(
    hrag: HRAG, sql: psycopg.Connection, case: Case, opts: IngestOptions
) -> None:
    ingest_and_check(hrag, sql, case, opts)


@DB
@given(case=code_cases(), opts=options)
def test_python_modules_round_trip_through_the_database(
    hrag: HRAG, sql: psycopg.Connection, case: Case, opts: IngestOptions
) -> None:
    ingest_and_check(hrag, sql, case, opts)


@DB
@given(case=st.one_of(window_cases(), pages_cases(), html_cases()), opts=options)
def test_window_pages_and_html_round_trip_through_the_database(
    hrag: HRAG, sql: psycopg.Connection, case: Case, opts: IngestOptions
) -> None:
    ingest_and_check(hrag, sql, case, opts)


# --------------------------------------------------------- a real file, exactly

def test_the_stdlib_json_package_round_trips_byte_for_byte_with_the_code_strategy(
    hrag: HRAG, sql: psycopg.Connection
) -> None:
    """Python's own json/__init__.py (long docstring with doctests, split into children) comes back exact.

    Before separators, 12 of its lines came back broken (``>>> def ⏎⏎as_complex(dct):``).
    """
    path = Path(json.__file__)
    original = path.read_bytes().decode("utf-8")
    report = hrag.ingest([path], collection=COLLECTION, options=IngestOptions(strategy="code"))
    assert not report.failed, report.failed
    (result,) = report.results
    root = sql.execute("SELECT id FROM hrag.nodes WHERE document_id = %s AND parent_id IS NULL",
                       (result.document_id,)).fetchone()[0]
    text = hrag.node_text(root)
    assert text is not None
    assert (text + "\n").encode("utf-8") == original.encode("utf-8")  # only the final newline is not stored
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE document_id = %s AND separator = ''",
                       (result.document_id,)).fetchone()[0] > 0, "the docstring was split into continuing pieces"


def test_the_stdlib_json_package_round_trips_exactly_before_the_database() -> None:
    path = Path(json.__file__)
    original = path.read_text(encoding="utf-8")
    tree = load_document(path, strategy="code")
    doc = prepare_tree(tree, IngestOptions(), collection=COLLECTION, counter=ApproximateTokenCounter())
    assert text_of_rows([(n.content, n.separator) for n in doc.nodes]) == normalised(original)
    assert tree.root.full_text() + "\n" == original


@pytest.mark.parametrize(("text", "expected"), [
    ("\ufeff# T\r\n\r\nbody\r\n", "# T\n\nbody"),
    ("  \n\n# T\n\n\n\nbody  \n\n", "# T\n\n\n\nbody"),
    ("# T\rbody", "# T\nbody"),
])
def test_the_normalisation_is_only_bom_line_ends_and_outer_whitespace(text: str, expected: str) -> None:
    assert normalised(text) == expected
    check_before_the_database(Case("headings", text, expected, parse_markdown), IngestOptions())


_PYTHON_WITH_TRAILING_WHITESPACE = (
    'class Store:  \n    """Keeps things.  \n    \n    Two lines.\t\n    """\n    x = 1  \n\n'
    "    def load(self, key):\t\n        value = self.get(key)  \n        \n        if value is None:\t\n"
    "            return None \n\t\n        return value\n\n\n"
    "def helper(x):  \n    y = x + 1\t\n    \n    return y\n"
)
_MARKDOWN_WITH_TRAILING_WHITESPACE = (
    "# Build\n\nRun this:\n\n```sh\nmake test  \n\t\nmake lint\t\n```\n\nOr indented:\n\n"
    "    $ hrag check  \n    \n    ok\t\n\n~~~python\ndef f():  \n    \n    return 1\t\n~~~\n\nDone.\n"
)
_RST_WITH_TRAILING_WHITESPACE = "Usage\n=====\n\nRun::\n\n    make test  \n    \n    make lint\t\n\nDone.\n"


@pytest.mark.parametrize(("text", "parse"), [
    (_PYTHON_WITH_TRAILING_WHITESPACE, parse_python),
    (_MARKDOWN_WITH_TRAILING_WHITESPACE, parse_markdown),
    (_RST_WITH_TRAILING_WHITESPACE, parse_rst),
], ids=["python", "markdown-fenced-and-indented", "rst-literal"])
@pytest.mark.parametrize("child", ["function", "paragraph", "none"])
def test_code_keeps_its_trailing_spaces_tabs_and_indented_blank_lines(
    hrag: HRAG, sql: psycopg.Connection, text: str, parse: Callable[[str, str], DocumentTree], child: str
) -> None:
    """Whitespace at the end of a code line, and blank lines that keep their indentation, come back exactly."""
    if parse is parse_python:
        ast.parse(text)
    case = Case(f"{parse.__name__}-{child}", text, normalised(text), parse)
    opts = IngestOptions(child=child)  # type: ignore[arg-type]
    check_before_the_database(case, opts)
    ingest_and_check(hrag, sql, case, opts)


def test_a_whitespace_only_edit_is_a_change_and_node_text_follows_it(hrag: HRAG, sql: psycopg.Connection) -> None:
    source = "property/whitespace.md"
    before, after = "# T\n\nOne.\n\nTwo.", "# T\n\nOne.\n\n\nTwo."
    assert hrag.ingest_tree(parse_markdown(before, source), collection=COLLECTION).status == "created"
    result = hrag.ingest_tree(parse_markdown(after, source), collection=COLLECTION)
    assert (result.status, result.embedded) == ("updated", 0), "same texts: nothing to embed, but a change"
    root = sql.execute("SELECT id FROM hrag.nodes WHERE document_id = %s AND parent_id IS NULL",
                       (result.document_id,)).fetchone()[0]
    assert hrag.node_text(root) == after
