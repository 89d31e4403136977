"""Properties of ingestion into a real database, over generated documents (hypothesis).

Random Markdown (headings of random levels, English and Japanese paragraphs,
list items, code fences whose lines start with '#') and random clause
documents (第N条 with numbered items) are ingested, each under a fresh source
name of one database, and then:

* ``hrag.node_text(root)`` reproduces the document's text, modulo the
  documented normalisation (whitespace, and the '#' heading markers that
  become node titles);
* every node is reachable from the root, and every stored child_count is
  the real number of children;
* re-ingesting the same text changes nothing: status "unchanged", same ids,
  and a fresh parse of the text yields exactly the stored ids.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hrag_pg.api import HRAG
from hrag_pg.ingest.clauses import parse_clauses
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.tree import DocumentTree
from tests.embedders import HashingEmbedder

_IGNORED = re.compile(r"[\s#]+")


def normalised(text: str) -> str:
    """Text without whitespace and without '#' (Markdown heading markers become titles)."""
    return _IGNORED.sub("", text)


# ---------------------------------------------------------------- generators

ENGLISH = ["employees", "submit", "form", "within", "days", "office", "manager", "approves", "leave",
           "travel", "budget", "report", "policy", "the", "a", "of", "to", "and", "laptop", "badge",
           "quarterly", "review", "backup", "server", "password", "rotates", "every", "Monday", "3.5",
           "e.g.", "(see", "appendix)", "it's", "\"quoted\"", "cost:", "20,000", "yen", "café", "naïve"]
JAPANESE = ["従業員は", "通勤手当を", "申請する", "会社は", "毎月25日に", "給与を", "支払う", "試用期間中の",
            "昼食手当は", "本採用以降とする", "ウイルス対策ソフトを", "導入しなければならない", "私物端末の",
            "業務利用は", "許可制とする"]

english_words = st.lists(st.sampled_from(ENGLISH), min_size=1, max_size=25).map(" ".join)
english_sentence = english_words.map(lambda s: s[0].upper() + s[1:] + ".")
japanese_sentence = st.lists(st.sampled_from(JAPANESE), min_size=1, max_size=8).map(lambda ws: "".join(ws) + "。")
paragraph = st.lists(st.one_of(english_sentence, japanese_sentence), min_size=1, max_size=4).map(" ".join)
heading = st.tuples(st.integers(1, 6), st.lists(st.sampled_from(ENGLISH + JAPANESE), min_size=1, max_size=4)
                    ).map(lambda t: "#" * t[0] + " " + " ".join(t[1]))
list_block = st.lists(st.tuples(st.sampled_from(["-", "*", "1.", "2)"]), english_words),
                      min_size=1, max_size=4).map(lambda items: "\n".join(f"{m} {w}" for m, w in items))
code_block = st.lists(st.sampled_from(["# a comment, not a heading", "## neither is this", "x = 1",
                                       "print('# hash in a string')", "    return x  # trailing"]),
                      min_size=1, max_size=5).map(lambda lines: "```python\n" + "\n".join(lines) + "\n```")
markdown_documents = st.lists(st.one_of(heading, paragraph, paragraph, list_block, code_block),
                              min_size=1, max_size=14).map(lambda blocks: "\n\n".join(blocks)
                                                           ).filter(lambda t: any(c.isalpha() for c in t))


def _article(number: int, title: str, body: str | None, items: list[str], style: str) -> str:
    markers = {"arabic": lambda i: f"{i}.", "full": lambda i: f"{chr(0xFF10 + i)}．",
               "paren": lambda i: f"({i})", "circled": lambda i: chr(0x2460 + i - 1)}[style]
    lines = [f"第{number}条（{title}）"]
    if body:
        lines.append(body)
    lines += [f"{markers(i)} {item}" for i, item in enumerate(items, start=1)]
    return "\n".join(lines)


article = st.tuples(st.sampled_from(["目的", "手当", "休暇", "服務", "罰則"]),
                    st.one_of(st.none(), japanese_sentence),
                    st.lists(st.one_of(japanese_sentence, english_sentence), min_size=0, max_size=5),
                    st.sampled_from(["arabic", "full", "paren", "circled"]))


@st.composite
def clause_documents(draw: st.DrawFn) -> str:
    parts = ["# 就業規則"] if draw(st.booleans()) else []
    articles = draw(st.lists(article, min_size=1, max_size=6))
    chapter_every = draw(st.sampled_from([0, 2, 3]))
    for n, (title, body, items, style) in enumerate(articles, start=1):
        if chapter_every and (n - 1) % chapter_every == 0:
            parts.append(f"## 第{(n - 1) // chapter_every + 1}章 総則")
        if body is None and not items:
            items = ["この条の定めに従う。"]
        parts.append(_article(n, title, body, items, style))
    return "\n\n".join(parts)


# ------------------------------------------------------------------ checks

_sources = itertools.count()


def ingest_and_check(hrag: HRAG, sql: psycopg.Connection, text: str,
                     parse: Callable[[str, str], DocumentTree], kind: str) -> None:
    source = f"property/{kind}-{next(_sources)}.md"
    result = hrag.ingest_tree(parse(text, source))
    assert result.status == "created"
    doc_id = result.document_id
    root = sql.execute("SELECT id FROM hrag.nodes WHERE document_id = %s AND parent_id IS NULL",
                       (doc_id,)).fetchone()[0]

    # 1. The root's full text is the document, modulo whitespace and heading markers.
    assert normalised(hrag.node_text(root) or "") == normalised(text)

    # 2. Every node hangs below the root; child_count is the real number of children.
    total, reachable = sql.execute(
        """
        WITH RECURSIVE below(id) AS (
            SELECT %(root)s::uuid
            UNION ALL
            SELECT n.id FROM hrag.nodes n JOIN below b ON n.parent_id = b.id
        )
        SELECT (SELECT count(*) FROM hrag.nodes WHERE document_id = %(doc)s), (SELECT count(*) FROM below)
        """,
        {"root": root, "doc": doc_id},
    ).fetchone()
    assert total == reachable == result.nodes
    assert sql.execute(
        "SELECT count(*) FROM hrag.nodes n WHERE n.document_id = %s "
        "AND n.child_count <> (SELECT count(*) FROM hrag.nodes c WHERE c.parent_id = n.id)",
        (doc_id,),
    ).fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE document_id = %s AND embedding IS NULL "
                       "AND child_count = 0 AND depth > 0", (doc_id,)).fetchone()[0] == 0

    # 3. Same text, same ids: re-ingesting is a no-op, and a fresh parse names the same nodes.
    stored = [r[0] for r in sql.execute("SELECT id FROM hrag.nodes WHERE document_id = %s ORDER BY seq",
                                        (doc_id,))]
    again = hrag.ingest_tree(parse(text, source))
    assert (again.status, again.document_id, again.embedded) == ("unchanged", doc_id, 0)
    embedder = hrag.embedder
    fresh = prepare_tree(parse(text, source), IngestOptions(), model_name=embedder.model_name,  # type: ignore[attr-defined]
                         counter=embedder.token_counter)
    assert [n.id for n in fresh.nodes] == stored
    assert [r[0] for r in sql.execute("SELECT id FROM hrag.nodes WHERE document_id = %s ORDER BY seq",
                                      (doc_id,))] == stored


PROPERTY_SETTINGS = settings(max_examples=30, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(text=markdown_documents)
def test_markdown_documents_round_trip_through_the_database(
    hrag: HRAG, sql: psycopg.Connection, text: str
) -> None:
    ingest_and_check(hrag, sql, text, parse_markdown, "md")


@PROPERTY_SETTINGS
@given(text=clause_documents())
def test_clause_documents_round_trip_through_the_database(
    hrag: HRAG, sql: psycopg.Connection, text: str
) -> None:
    ingest_and_check(hrag, sql, text, parse_clauses, "clauses")


def test_the_normaliser_ignores_only_whitespace_and_hashes() -> None:
    assert normalised("## Title\n\n  para one\tand two\n```\n# code\n```") == "Titleparaoneandtwo```code```"
    assert normalised("第4条　手当") == "第4条手当"  # the ideographic space is whitespace
    assert HashingEmbedder().dim == 384
