"""Granularity: how much of a returned context lies in the section the question needs.

Recall cannot see a whole document returned for a one-item question: the
document contains every answer.  So each question also has a *gold section*
and a context is scored by the share of its tokens that lie inside it:

* a question that names its section (``"source"``: the file, ``"section"``:
  the heading of the article or section, as the regulations' question sets
  do) has that node of that document;
* any other has the deepest titled node (not a group) whose subtree holds
  every evidence snippet: for a broad question the section its snippets share,
  for a narrow one the section around its paragraph.

A returned node inside the gold section counts whole; one that contains it
counts the gold section's tokens; any other counts nothing.  Nodes of one
tree are nested or disjoint, so this is exact, and a passage cut at the
budget counts at most what was kept of it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import tuple_row


@dataclass(frozen=True)
class Span:
    """A node's place: its document and pre-order range, and its stored tokens."""

    node_id: Any
    document_id: Any
    seq: int
    end: int
    tokens: int

    def contains(self, other: Span) -> bool:
        return self.document_id == other.document_id and self.seq <= other.seq and other.end <= self.end


_NAMED = """
SELECT n.id, n.document_id, n.seq, n.subtree_end, n.subtree_tokens
  FROM hrag.nodes n
  JOIN hrag.documents d ON d.id = n.document_id
 WHERE d.collection = %(collection)s
   AND (d.source = %(source)s OR d.source LIKE '%%/' || %(source)s)
   AND btrim(regexp_replace(coalesce(n.title, ''), '^#+', '')) = %(section)s
 ORDER BY n.depth
"""

# The leaves holding a snippet, whitespace collapsed as the evaluation compares.
_LEAVES = """
SELECT n.id, n.document_id FROM hrag.nodes n
 WHERE n.collection = %(collection)s AND n.child_count = 0
   AND strpos(regexp_replace(n.content, '\\s+', ' ', 'g'), %(snippet)s) > 0
"""

_ANCESTORS = """
WITH RECURSIVE up AS (
    SELECT n.id, n.parent_id, n.document_id, n.depth, n.title, n.kind, n.seq, n.subtree_end, n.subtree_tokens
      FROM hrag.nodes n WHERE n.document_id = %(document_id)s AND n.id = %(node_id)s
    UNION ALL
    SELECT p.id, p.parent_id, p.document_id, p.depth, p.title, p.kind, p.seq, p.subtree_end, p.subtree_tokens
      FROM up JOIN hrag.nodes p ON p.document_id = up.document_id AND p.id = up.parent_id
)
SELECT id, document_id, depth, title, kind, seq, subtree_end, subtree_tokens FROM up ORDER BY depth DESC
"""


def _tuples(conn: psycopg.Connection[Any]) -> Any:
    """A cursor of ``conn`` returning tuples, whatever the connection's row factory."""
    return conn.cursor(row_factory=tuple_row)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def gold_span(conn: psycopg.Connection[Any], collection: str, question: dict[str, Any]) -> Span | None:
    """The question's gold section, or None when it cannot be placed (a snippet split across leaves)."""
    conn = _tuples(conn)
    if question.get("section") and question.get("source"):
        row = conn.execute(_NAMED, {"collection": collection, "source": question["source"],
                                    "section": question["section"]}).fetchone()
        if row is None:
            raise LookupError(f"{question['id']}: no section {question['section']!r} in {question['source']}")
        return Span(*row)
    chains: list[list[tuple[Any, ...]]] = []
    for snippet in question["evidence"]:
        leaf = conn.execute(_LEAVES, {"collection": collection, "snippet": _collapse(snippet)}).fetchone()
        if leaf is None:
            return None
        chains.append(conn.execute(_ANCESTORS, {"document_id": leaf[1], "node_id": leaf[0]}).fetchall())
    shared = set.intersection(*({row[0] for row in chain} for chain in chains))
    for row in chains[0]:  # deepest first
        node_id, document_id, _depth, title, kind, seq, end, tokens = row
        if node_id in shared and title and kind != "group":
            return Span(node_id, document_id, seq, end, tokens)
    return None


def gold_spans(conn: psycopg.Connection[Any], collection: str,
               questions: Sequence[dict[str, Any]]) -> dict[str, Span | None]:
    return {q["id"]: gold_span(conn, collection, q) for q in questions}


_SPANS = """
SELECT n.id, n.document_id, n.seq, n.subtree_end, n.subtree_tokens
  FROM unnest(%(ids)s::uuid[], %(docs)s::uuid[]) AS r(id, doc)
  JOIN hrag.nodes n ON n.document_id = r.doc AND n.id = r.id
"""


def spans_of(conn: psycopg.Connection[Any], rows: Sequence[dict[str, Any]]) -> list[Span]:
    """The returned rows' places, in their order."""
    ids = [r["node_id"] for r in rows]
    conn = _tuples(conn)
    found = {row[0]: Span(*row) for row in conn.execute(_SPANS, {"ids": ids,
                                                                  "docs": [r["document_id"] for r in rows]})}
    return [found[i] for i in ids]


def inside_share(spans: Sequence[Span], kept_tokens: Sequence[int], gold: Span) -> float:
    """The share of the kept tokens that lie inside ``gold`` (``kept_tokens``: each passage's, after a cut)."""
    total = sum(kept_tokens)
    if total == 0:
        return 0.0
    inside = 0
    for span, kept in zip(spans, kept_tokens, strict=False):
        if gold.contains(span):
            inside += kept
        elif span.contains(gold):
            inside += min(gold.tokens, kept)
    return inside / total


def returns_gold(spans: Sequence[Span], gold: Span) -> bool:
    """Whether the gold section itself is one of the returned nodes (not a part of it, not a node around it)."""
    return any(s.document_id == gold.document_id and s.seq == gold.seq and s.end == gold.end for s in spans)


@dataclass(frozen=True)
class Granularity:
    """One kind's figures: recall, share inside the gold section, tokens, gold section returned whole."""

    recall: float
    share: float
    tokens: float
    gold_returned: float
    count: int  # questions
    placed: int  # of them, those whose gold section was found


def summarize(recalls: Sequence[float], shares: Sequence[float | None], tokens: Sequence[float],
              returned: Sequence[bool | None]) -> Granularity:
    placed = [s for s in shares if s is not None]
    hit = [r for r in returned if r is not None]
    return Granularity(statistics.mean(recalls), statistics.mean(placed) if placed else float("nan"),
                       statistics.mean(tokens), statistics.mean(hit) if hit else float("nan"), len(recalls),
                       len(placed))
