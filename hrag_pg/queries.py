"""The SQL statements the Python layer sends, shared by the sync and async repositories.

Each is one round trip calling a function from ``hrag_pg/sql/``; parameters
are named after the function arguments they fill (``%(top_k)s``,
``%(max_tokens)s``, …) and cast explicitly (Python floats arrive as ``double
precision``, the functions take ``real``).  The row mappers at the bottom turn
the rows into the public models.
"""

from __future__ import annotations

import json as _json
import math as _math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as _np

from . import argument_limits as _limits
from . import defaults
from .errors import InvalidArgument
from .models import OutlineEntry, OutlineNode, RetrievalResult, SearchHit

# The hits come with the text a reranker scores (heading path + content, or
# the question of a QA node), so reranking needs no second round trip.
SEARCH_LEAVES = """
SELECT s.node_id, s.parent_id, s.document_id, s.score, n.heading_path,
       coalesce(n.metadata->>'question', n.content) AS text
  FROM hrag.search_leaves(%(query)s, %(top_k)s::int, %(collection)s::text, %(filter)s::jsonb) AS s
  JOIN hrag.nodes n ON n.document_id = s.document_id AND n.id = s.node_id
 ORDER BY s.score DESC, s.node_id
"""

PARENT_CHILD = """
SELECT r.node_id, r.document_id, r.title, r.heading_path, r.content, r.score,
       r.matched_children, r.rank, r.token_count, n.depth, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.parent_child(%(query)s, %(top_k)s::int, %(max_parents)s::int, %(collection)s::text,
                         %(filter)s::jsonb, %(min_score)s::real) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

AUTO_MERGE = """
SELECT r.*, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.auto_merge(%(query)s,
                       hrag.sample_hits(%(top_k)s::int, %(collection)s::text, %(max_hit_share)s::real),
                       %(merge_threshold)s::real,
                       %(collection)s::text, %(filter)s::jsonb) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

AUTO_MERGE_HITS = """
SELECT r.*, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.auto_merge_hits(%(ids)s::uuid[], %(scores)s::real[], %(merge_threshold)s::real) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

PARENT_CHILD_HITS = """
SELECT r.node_id, r.document_id, r.title, r.heading_path, r.content, r.score,
       r.matched_children, r.rank, r.token_count, n.depth, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.parent_child_hits(%(ids)s::uuid[], %(scores)s::real[], %(max_parents)s::int, %(top_k)s::int) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

SEARCH_HYBRID = """
SELECT s.node_id, s.parent_id, s.document_id, s.score, n.heading_path,
       coalesce(n.metadata->>'question', n.content) AS text
  FROM hrag.search_hybrid(%(query)s, %(question)s::text, %(top_k)s::int, %(collection)s::text, %(filter)s::jsonb,
                          %(lexical_weight)s::real, %(candidates)s::int, %(min_relative_score)s::real) AS s
  JOIN hrag.nodes n ON n.document_id = s.document_id AND n.id = s.node_id
 ORDER BY s.score DESC, s.node_id
"""

# A question to collections embedded with different models: one vector per
# collection (its model's), each collection searched by search_hybrid, whose
# scores are read above each question's background and so compare across
# models; the best k of them all (auto-merge: hrag.sample_hits of k), and the
# relative floor taken over the merged list.  Each collection is checked
# against the model of its vector (hrag._checked_collection).
SEARCH_MANY = """
WITH hit AS (
    SELECT s.node_id, s.parent_id, s.document_id, s.score
      FROM unnest(%(collections)s::text[], %(queries)s::vector[], %(models)s::text[], %(fingerprints)s::text[])
           AS q(collection, query, model, fingerprint)
     CROSS JOIN LATERAL hrag.search_hybrid(q.query, %(question)s::text, %(top_k)s::int,
                                           hrag._checked_collection(q.collection, q.model, q.fingerprint),
                                           %(filter)s::jsonb, %(lexical_weight)s::real, %(candidates)s::int) AS s
),
best AS (
    SELECT * FROM hit ORDER BY score DESC, node_id
     LIMIT hrag.sample_hits(%(top_k)s::int, NULL::text, %(max_hit_share)s::real)
)
SELECT b.node_id, b.parent_id, b.document_id, b.score, n.heading_path,
       coalesce(n.metadata->>'question', n.content) AS text
  FROM best b
  JOIN hrag.nodes n ON n.document_id = b.document_id AND n.id = b.node_id
 WHERE %(min_relative_score)s::real IS NULL
    OR b.score >= %(min_relative_score)s::real * (SELECT max(x.score) FROM best x)
 ORDER BY b.score DESC, b.node_id
"""

SAMPLE_HITS = "SELECT hrag.sample_hits(%(top_k)s::int, %(collection)s::text, %(max_hit_share)s::real) AS k"

# Hybrid hits merged in the same statement: still one round trip.  The merge
# is a CTE of its own: on Citus a function call joined with the tables in the
# same query level would be pushed down to the shards, where it cannot run.
AUTO_MERGE_HYBRID = """
WITH hit AS (
    SELECT node_id, score
      FROM hrag.search_hybrid(%(query)s, %(question)s::text,
                              hrag.sample_hits(%(top_k)s::int, %(collection)s::text, %(max_hit_share)s::real),
                              %(collection)s::text, %(filter)s::jsonb, %(lexical_weight)s::real,
                              %(candidates)s::int, %(min_relative_score)s::real)
),
r AS (
    SELECT * FROM hrag.auto_merge_hits(ARRAY(SELECT node_id FROM hit ORDER BY score DESC, node_id),
                                       ARRAY(SELECT score FROM hit ORDER BY score DESC, node_id),
                                       %(merge_threshold)s::real)
)
SELECT r.*, n.kind, d.source, d.metadata AS document_metadata
  FROM r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

# The hybrid ranking over all candidates, so parents beyond the first
# top_k_children can still be found (k counts parents, as in parent_child);
# the expansion is a CTE of its own, as in AUTO_MERGE_HYBRID.
PARENT_CHILD_HYBRID = """
WITH hit AS (
    SELECT node_id, score
      FROM hrag.search_hybrid(%(query)s, %(question)s::text, %(candidates)s::int, %(collection)s::text,
                              %(filter)s::jsonb, %(lexical_weight)s::real, %(candidates)s::int,
                              %(min_relative_score)s::real)
     WHERE %(min_score)s::real IS NULL OR score >= %(min_score)s::real
),
r AS (
    SELECT * FROM hrag.parent_child_hits(ARRAY(SELECT node_id FROM hit ORDER BY score DESC, node_id),
                                         ARRAY(SELECT score FROM hit ORDER BY score DESC, node_id),
                                         %(max_parents)s::int, %(top_k)s::int)
)
SELECT r.node_id, r.document_id, r.title, r.heading_path, r.content, r.score,
       r.matched_children, r.rank, r.token_count, n.depth, n.kind, d.source, d.metadata AS document_metadata
  FROM r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""


# Budget-aware selection (auto mode): the best non-overlapping context within max_tokens.
RETRIEVE = """
SELECT r.*, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.retrieve(%(query)s, %(question)s::text, %(max_tokens)s::int, %(collection)s::text, %(filter)s::jsonb,
                     %(top_k)s::int, %(lexical_weight)s::real) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""

RETRIEVE_HITS = """
SELECT r.*, n.kind, d.source, d.metadata AS document_metadata
  FROM hrag.retrieve_hits(%(ids)s::uuid[], %(scores)s::real[], %(max_tokens)s::int) AS r
  JOIN hrag.nodes n ON n.document_id = r.document_id AND n.id = r.node_id
  JOIN hrag.documents d ON d.id = r.document_id
 ORDER BY r.rank
"""


# A parent-child or auto-merge context under a token budget, in one round
# trip: the mode's hits and results as above, then hrag._fit_budget keeps the
# results whole, best first, while they fit and replaces one that does not by
# the budget mode's choice among its own hits.  Each row is a step: a result
# kept whole or dropped (its own columns), or a part that replaces it.  The
# hits come from the candidate stage or, reranked, from the caller; a part is
# chosen by the candidate stage's scores (``part_score``), on the scale the
# budget mode's weights are made for, whatever scale a reranker scores on.
_CONTEXT = """
WITH hit AS (
    SELECT s.node_id, s.document_id, s.score, s.part_score FROM {search}
     WHERE %(min_score)s::real IS NULL OR s.score >= %(min_score)s::real
),
r AS (
    SELECT * FROM {results}
),
ordered AS (
    SELECT r.*, (row_number() OVER (ORDER BY r.score DESC, r.rank))::int AS ord FROM r
),
owned AS (
    SELECT o.ord, h.node_id, h.document_id, h.part_score AS score
      FROM ordered o
     CROSS JOIN LATERAL unnest(o.{hits}) AS m(id)
      JOIN hit h ON h.node_id = m.id
),
fit AS (
    SELECT * FROM hrag._fit_budget(
        ARRAY(SELECT node_id FROM ordered ORDER BY ord), ARRAY(SELECT token_count FROM ordered ORDER BY ord),
        ARRAY(SELECT node_id FROM owned ORDER BY ord, score DESC, node_id),
        ARRAY(SELECT document_id FROM owned ORDER BY ord, score DESC, node_id),
        ARRAY(SELECT score FROM owned ORDER BY ord, score DESC, node_id),
        ARRAY(SELECT ord FROM owned ORDER BY ord, score DESC, node_id),
        %(max_tokens)s::int)
)
SELECT f.owner, f.kept, f.node_id, n.document_id, n.depth, n.kind,
       CASE WHEN f.kept = 'part' THEN f.title ELSE o.title END AS title,
       CASE WHEN f.kept = 'part' THEN f.heading_path ELSE o.heading_path END AS heading_path,
       CASE WHEN f.kept = 'part' THEN f.content ELSE o.content END AS content,
       o.score, o.rank,
       CASE WHEN f.kept = 'part' THEN f.token_count ELSE o.token_count END AS token_count,
       CASE WHEN f.kept = 'part' THEN NULL ELSE {matched} END AS matched_children,
       CASE WHEN f.kept = 'part' THEN f.merged_from ELSE {merged} END AS merged_from,
       CASE WHEN f.kept = 'part' THEN f.hit_ratio ELSE {ratio} END AS hit_ratio,
       f.reason, d.source, d.metadata AS document_metadata
  FROM fit f
  JOIN ordered o ON o.ord = f.owner
  JOIN hrag.nodes n ON n.document_id = coalesce(f.document_id, o.document_id) AND n.id = f.node_id
  JOIN hrag.documents d ON d.id = n.document_id
 ORDER BY f.step
"""

_HYBRID_HITS = """(
    SELECT x.*, x.score AS part_score
      FROM hrag.search_hybrid(%(query)s, %(question)s::text, {k}, %(collection)s::text, %(filter)s::jsonb,
                              %(lexical_weight)s::real, %(candidates)s::int, %(min_relative_score)s::real) AS x
) AS s"""
_VECTOR_HITS = """(
    SELECT x.*, x.score AS part_score
      FROM hrag.search_leaves(%(query)s, {k}, %(collection)s::text, %(filter)s::jsonb) AS x
) AS s"""
_GIVEN_HITS = ("unnest(%(ids)s::uuid[], %(docs)s::uuid[], %(scores)s::real[], %(part_scores)s::real[]) "
               "AS s(node_id, document_id, score, part_score)")
_HIT_ARRAYS = ("ARRAY(SELECT node_id FROM hit ORDER BY score DESC, node_id), "
               "ARRAY(SELECT score FROM hit ORDER BY score DESC, node_id)")


def _context_statement(source: str, results: str, hits: str, matched: str, merged: str, ratio: str) -> str:
    return _CONTEXT.format(search=source, results=results.format(hits=_HIT_ARRAYS), hits=hits,
                           matched=matched, merged=merged, ratio=ratio)


def _searched(search: Search, k: str) -> str:
    return (_HYBRID_HITS if search.hybrid else _VECTOR_HITS).format(k=k)


@dataclass(frozen=True)
class GivenHits:
    """Hits a reranker chose: their order and scores, and the candidate stage's scores of them."""

    ids: list[Any]
    document_ids: list[Any]
    scores: list[float]
    part_scores: list[float]

    def params(self) -> dict[str, Any]:
        return {"ids": self.ids, "docs": self.document_ids, "scores": self.scores,
                "part_scores": self.part_scores, "min_score": None}


_PARENT_CHILD_RESULTS = ("hrag.parent_child_hits({hits}, %(max_parents)s::int, %(top_k)s::int)",
                         "matched_children", "o.matched_children", "NULL::uuid[]", "NULL::real")
_AUTO_MERGE_RESULTS = ("hrag.auto_merge_hits({hits}, %(merge_threshold)s::real)",
                       "merged_from", "NULL::uuid[]", "o.merged_from", "o.hit_ratio")

# --------------------------------------------------------------------- plans
# Which statement a retrieval sends and with which parameters; the sync and
# async repositories only execute what these return.

#: The SQL functions' bound on counts (hrag._check_count in sql/common.sql).
MAX_COUNT = _limits.MAX_COUNT
_REAL_MAX = 3.4028234663852886e38


def _budget(value: Any) -> Any:
    """A token budget: 1..MAX_CONTEXT_TOKENS, as hrag.retrieve_hits checks it."""
    return _limits.check_count(value, 'argument "max_tokens"', maximum=_limits.MAX_CONTEXT_TOKENS)


def _count(value: Any, name: str) -> Any:
    """Refuse counts outside 1..MAX_COUNT here, naming the argument the caller gave.

    The SQL functions check the same range, but the hybrid statements pass
    derived counts (the candidate pool is at least 30), so checking in SQL alone
    would name a number the caller never typed.  None passes (optional counts).
    """
    if value is None:
        return value
    return _limits.check_count(value, f'argument "{name}"')


def _real(value: Any, name: str) -> Any:
    """Refuse numbers outside PostgreSQL's real range (the server would say only "overflow")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and not _math.isfinite(value):
        return value  # NaN and infinities reach SQL, whose checks name the argument
    if abs(value) > _REAL_MAX:
        raise InvalidArgument(f'argument "{name}" is out of range for a real number, got {value!r}')
    return value


@dataclass(frozen=True)
class Search:
    """What to search for and how to score it.

    ``lexical_weight = 0`` and no ``min_relative_score`` use the plain SQL
    functions (``hrag.parent_child``, ``hrag.auto_merge``); otherwise the
    candidates are rescored by ``hrag.search_hybrid``.
    """

    #: The question's vector, or for a question to collections embedded with different models one
    #: vector per collection (its model's): those are searched collection by collection (SEARCH_MANY).
    query: Any  # np.ndarray | dict[str, np.ndarray]
    text: str | None = None
    collection: str | None = None
    filter: dict[str, Any] | None = None
    lexical_weight: float = defaults.LEXICAL_WEIGHT
    #: Vector candidates rescored by the hybrid score (None: k, at least 30).
    candidates: int | None = None
    min_relative_score: float | None = None
    #: The model (name, fingerprint) that made ``query`` (per collection for one vector per
    #: collection), which the statement checks against the collections' records (None: unchecked).
    model: Any = None  # tuple[str, str] | dict[str, tuple[str, str]] | None
    #: Score by hrag.search_hybrid even without lexical weight (the scale the budget mode's statement reads).
    always_hybrid: bool = False

    def candidate_count(self, k: int) -> int:
        """How many vector candidates the hybrid score rescores (as hrag.search_hybrid defaults)."""
        if self.candidates is None:
            return max(k, 30)
        return max(self.candidates, k)

    @property
    def per_collection(self) -> bool:
        """Whether the question has one vector per collection (collections of different models)."""
        return isinstance(self.query, dict)

    @property
    def hybrid(self) -> bool:
        """Whether the hybrid statements are needed (no question text: nothing lexical to weigh)."""
        return (self.lexical_weight > 0 and bool(self.text)) or self.min_relative_score is not None \
            or self.always_hybrid

    def params(self, k: int) -> dict[str, Any]:
        if self.filter is not None and not isinstance(self.filter, dict):
            raise ValueError(f"filter must be a JSON object (a dict), got {type(self.filter).__name__}")
        _count(self.candidates, "candidates")
        _real(self.lexical_weight, "lexical_weight")
        _real(self.min_relative_score, "min_relative_score")
        vectors: dict[str, Any]
        if self.per_collection:
            stamps = [(self.model or {}).get(c, (None, None)) for c in self.query]
            vectors = {"collections": list(self.query),
                       "queries": [_np.asarray(v, dtype=_np.float32) for v in self.query.values()],
                       "models": [s[0] for s in stamps], "fingerprints": [s[1] for s in stamps]}
        else:
            model, fingerprint = self.model or (None, None)
            vectors = {"query": _np.asarray(self.query, dtype=_np.float32),
                       "question_model": model, "question_fingerprint": fingerprint}
        return {
            **vectors, "question": self.text, "top_k": k,
            "collection": self.collection,
            "filter": None if self.filter is None else _json.dumps(self.filter, ensure_ascii=False),
            "lexical_weight": self.lexical_weight, "candidates": self.candidate_count(k),
            "min_relative_score": self.min_relative_score,
        }


@dataclass(frozen=True)
class Stamped:
    """A question's vector(s) and the model that made them, as ``Reads.embed_query`` may return them.

    ``model`` is (name, fingerprint), or per collection for one vector per
    collection; the retrievers put it in :attr:`Search.model`.
    """

    vectors: Any  # np.ndarray | dict[str, np.ndarray]
    model: Any  # tuple[str, str] | dict[str, tuple[str, str]]


def unstamped(query: Any) -> Any:
    """The vector(s) of a question, stamped with their model or not."""
    return query.vectors if isinstance(query, Stamped) else query


_COLLECTION = "%(collection)s::text"
_CHECKED_COLLECTION = ("hrag._checked_collection(%(collection)s::text, %(question_model)s::text, "
                       "%(question_fingerprint)s::text)")


def _model_checked(plan: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The statement with its collection passed through hrag._checked_collection when the vector's model is known.

    The check reads the collections' model records in the snapshot the search
    reads, so a reembed that switched a collection after the question was
    embedded is refused (``ModelChanged``), never answered with the other
    model's vectors.
    """
    sql, params = plan
    if params.get("question_model") is None:
        return plan
    return sql.replace(_COLLECTION, _CHECKED_COLLECTION), params


def plan_search(search: Search, k: int, *, max_hit_share: float | None = None) -> tuple[str, dict[str, Any]]:
    """The ``k`` best candidates (a question to several models' collections: ``hrag.sample_hits`` of ``k``
    with ``max_hit_share``, over all of them)."""
    _count(k, "k")
    if search.per_collection:
        return SEARCH_MANY, {**search.params(k), "max_hit_share": max_hit_share}
    return _model_checked(((SEARCH_HYBRID if search.hybrid else SEARCH_LEAVES), search.params(k)))


def plan_sample_hits(top_k: int, collection: str | None, max_hit_share: float | None) -> tuple[str, dict[str, Any]]:
    """How many hits auto-merge reads (``hrag.sample_hits``: ``top_k``, fewer on a small collection)."""
    _count(top_k, "top_k")
    return SAMPLE_HITS, {"top_k": top_k, "collection": collection, "max_hit_share": max_hit_share}


def plan_parent_child(search: Search, top_k_children: int, max_parents: int,
                      min_score: float | None) -> tuple[str, dict[str, Any]]:
    _count(top_k_children, "top_k_children")
    _count(max_parents, "max_parents")
    _real(min_score, "min_score")
    params = search.params(top_k_children)
    params.update(max_parents=max_parents, min_score=min_score)
    return _model_checked(((PARENT_CHILD_HYBRID if search.hybrid else PARENT_CHILD), params))


def plan_auto_merge(search: Search, top_k: int, merge_threshold: float,
                    max_hit_share: float | None = None) -> tuple[str, dict[str, Any]]:
    """``max_hit_share``: use at most this share of the collection's search targets as hits
    (``hrag.sample_hits``); None takes ``top_k`` hits whatever the collection's size."""
    _count(top_k, "top_k")
    _real(merge_threshold, "merge_threshold")
    if max_hit_share is not None and not 0 < max_hit_share <= 1:
        raise InvalidArgument(f'argument "max_hit_share" must be in (0, 1], got {max_hit_share!r}')
    params = search.params(top_k)
    params.update(merge_threshold=merge_threshold, max_hit_share=max_hit_share)
    return _model_checked(((AUTO_MERGE_HYBRID if search.hybrid else AUTO_MERGE), params))


def plan_auto_merge_hits(ids: list[Any], scores: list[float], merge_threshold: float) -> tuple[str, dict[str, Any]]:
    _real(merge_threshold, "merge_threshold")
    return AUTO_MERGE_HITS, {"ids": ids, "scores": scores, "merge_threshold": merge_threshold}


def plan_parent_child_hits(ids: list[Any], scores: list[float], max_parents: int,
                           top_k_children: int | None) -> tuple[str, dict[str, Any]]:
    _count(max_parents, "max_parents")
    _count(top_k_children, "top_k_children")
    return PARENT_CHILD_HITS, {"ids": ids, "scores": scores, "max_parents": max_parents,
                               "top_k": top_k_children}


def plan_retrieve(search: Search, top_k: int, max_tokens: int) -> tuple[str, dict[str, Any]]:
    """``hrag.retrieve``: candidates (vector + lexical) → the best context within ``max_tokens``."""
    _count(top_k, "top_k")
    _budget(max_tokens)
    params = search.params(top_k)
    params.update(max_tokens=max_tokens)
    return _model_checked((RETRIEVE, params))


def plan_retrieve_hits(ids: list[Any], scores: list[float], max_tokens: int) -> tuple[str, dict[str, Any]]:
    _budget(max_tokens)
    return RETRIEVE_HITS, {"ids": ids, "scores": scores, "max_tokens": max_tokens}


def plan_parent_child_context(search: Search, top_k_children: int, max_parents: int, min_score: float | None,
                              max_tokens: int) -> tuple[str, dict[str, Any]]:
    """Parent-child within ``max_tokens`` (stored token counts), one round trip (see ``_CONTEXT``)."""
    _, params = plan_parent_child(search, top_k_children, max_parents, min_score)
    _budget(max_tokens)
    params.update(max_tokens=max_tokens)
    # the hybrid ranking reads all its candidates, so parents beyond the first top_k_children are found
    k = "%(candidates)s::int" if search.hybrid else "%(top_k)s::int"
    return _model_checked((_context_statement(_searched(search, k), *_PARENT_CHILD_RESULTS), params))


def plan_auto_merge_context(search: Search, top_k: int, merge_threshold: float, max_hit_share: float | None,
                            max_tokens: int) -> tuple[str, dict[str, Any]]:
    """Auto-merge within ``max_tokens`` (stored token counts), one round trip (see ``_CONTEXT``)."""
    _, params = plan_auto_merge(search, top_k, merge_threshold, max_hit_share)
    _budget(max_tokens)
    params.update(max_tokens=max_tokens, min_score=None)
    k = "hrag.sample_hits(%(top_k)s::int, %(collection)s::text, %(max_hit_share)s::real)"
    return _model_checked((_context_statement(_searched(search, k), *_AUTO_MERGE_RESULTS), params))


def plan_parent_child_hits_context(hits: GivenHits, max_parents: int, top_k_children: int | None,
                                   max_tokens: int) -> tuple[str, dict[str, Any]]:
    """Parent-child of reranked hits within ``max_tokens``, one round trip (see ``_CONTEXT``)."""
    _, params = plan_parent_child_hits(hits.ids, hits.scores, max_parents, top_k_children)
    _budget(max_tokens)
    return (_context_statement(_GIVEN_HITS, *_PARENT_CHILD_RESULTS),
            {**params, **hits.params(), "max_tokens": max_tokens})


def plan_auto_merge_hits_context(hits: GivenHits, merge_threshold: float,
                                 max_tokens: int) -> tuple[str, dict[str, Any]]:
    """Auto-merge of reranked hits within ``max_tokens``, one round trip (see ``_CONTEXT``)."""
    _, params = plan_auto_merge_hits(hits.ids, hits.scores, merge_threshold)
    _budget(max_tokens)
    return _context_statement(_GIVEN_HITS, *_AUTO_MERGE_RESULTS), {**params, **hits.params(), "max_tokens": max_tokens}


# ---------------------------------------------------------------- navigation
# The heading tree as a map (sql/navigation.sql): an outline, a node's
# children, one node with its full text.

#: The schema's revision (the server's health).
SCHEMA_REVISION = "SELECT version_num FROM hrag.alembic_version"
#: The collections this role can see (row-level security applies), sorted.
COLLECTIONS = "SELECT DISTINCT collection FROM hrag.documents ORDER BY collection"
OUTLINE = "SELECT * FROM hrag.outline(%(collection)s::text, %(source)s::text, %(max_depth)s::int)"
CHILDREN = "SELECT * FROM hrag.children(%(node_id)s::uuid)"
NODE = "SELECT * FROM hrag.node(%(node_id)s::uuid)"
#: A node read whole in one round trip: hrag.node's row, and its children (hrag.children's columns)
#: with the start of each one's text, which tells untitled paragraphs apart.
READ_NODE = """
SELECT n.*,
       coalesce((SELECT jsonb_agg(jsonb_build_object(
                            'node_id', c.node_id, 'kind', c.kind, 'title', c.title,
                            'token_count', c.token_count, 'child_count', c.child_count,
                            'text_start', left(hrag.node_text(c.node_id), 240))
                        ORDER BY c.ordinality)
                   FROM hrag.children(n.node_id) WITH ORDINALITY AS c), '[]'::jsonb) AS children
  FROM hrag.node(%(node_id)s::uuid) AS n
"""
#: The inspector's map of one answer: the nodes on the paths from their documents' roots to the hits and
#: the passages, with those nodes' children (so a merged node shows its unhit children beside its hits), in
#: document order.  A node's ancestors are the nodes of its document whose pre-order range (seq ..
#: subtree_end) holds its seq: no recursion.  Each node says its hit (score and rank, as the mode read
#: them), the passage it is (rank), and whether a passage's text holds it.
INSPECTION_TREE = """
WITH hit AS (
    SELECT h.node_id, h.score, h.rank::int AS rank
      FROM unnest(%(hit_ids)s::uuid[], %(hit_scores)s::real[]) WITH ORDINALITY AS h(node_id, score, rank)
),
passage AS (
    SELECT p.node_id, p.rank::int AS rank, n.document_id, n.seq, n.subtree_end
      FROM unnest(%(passage_ids)s::uuid[]) WITH ORDINALITY AS p(node_id, rank)
      JOIN hrag.nodes n ON n.id = p.node_id
),
marked AS (
    SELECT n.document_id, n.seq
      FROM hrag.nodes n
     WHERE n.id IN (SELECT node_id FROM hit UNION SELECT node_id FROM passage)
),
path AS (
    SELECT DISTINCT a.id, a.document_id
      FROM marked m
      JOIN hrag.nodes a ON a.document_id = m.document_id AND a.seq <= m.seq AND m.seq <= a.subtree_end
)
SELECT c.id AS node_id, c.parent_id, c.document_id, d.source, d.collection, c.depth, c.title, c.kind,
       c.subtree_tokens AS token_count, c.child_count, left(c.content, 240) AS text_start,
       hit.score AS hit_score, hit.rank AS hit_rank,
       (SELECT min(p.rank) FROM passage p WHERE p.node_id = c.id) AS passage_rank,
       EXISTS (SELECT 1 FROM passage p
                WHERE p.document_id = c.document_id AND p.seq <= c.seq AND c.seq <= p.subtree_end) AS in_context
  FROM hrag.nodes c
  JOIN hrag.documents d ON d.id = c.document_id
  LEFT JOIN hit ON hit.node_id = c.id
 WHERE c.document_id IN (SELECT document_id FROM path)
   AND (c.id IN (SELECT id FROM path) OR c.parent_id IN (SELECT id FROM path))
   AND NOT (c.kind = 'markup' AND c.child_count = 0)
 ORDER BY d.source, d.collection, c.seq
"""
#: hrag.outline's bound on max_depth (checked here too, so a huge number is named, not "integer out of range").
MAX_OUTLINE_DEPTH = 100


def outline_params(collection: str | None, source: str | None, max_depth: int) -> dict[str, Any]:
    if isinstance(max_depth, bool) or not isinstance(max_depth, int):
        raise InvalidArgument(f"max_depth must be a whole number, got {max_depth!r}", field="max_depth")
    if not 0 <= max_depth <= MAX_OUTLINE_DEPTH:
        raise InvalidArgument(f"max_depth must be between 0 and {MAX_OUTLINE_DEPTH}, got {max_depth}",
                              field="max_depth")
    return {"collection": collection, "source": source, "max_depth": max_depth}


# -------------------------------------------------------------- row mappers
# What the statements' rows become.


def hits_arrays(hits: Sequence[SearchHit]) -> tuple[list[uuid.UUID], list[float]]:
    """The ids and scores of hits, in their order, as the ``*_hits`` functions take them."""
    return [h.node_id for h in hits], [float(h.score) for h in hits]


def to_result(mode: str, row: dict[str, Any]) -> RetrievalResult:
    """A result row of any mode's statement."""
    return RetrievalResult(mode=mode, **row)  # type: ignore[arg-type]


def to_hit(row: dict[str, Any]) -> SearchHit:
    """A search row, with the text a reranker reads: the heading path, then the content."""
    path = " > ".join(p for p in (row.pop("heading_path", None) or []) if p)
    text = row.pop("text", "") or ""
    return SearchHit(**row, rerank_text=f"[{path}] {text}" if path else text)


def to_outline_entry(row: dict[str, Any]) -> OutlineEntry:
    """A row of hrag.outline or hrag.children."""
    return OutlineEntry(**row)


def to_outline_node(row: dict[str, Any]) -> OutlineNode:
    """The row of hrag.node."""
    return OutlineNode(**row)
