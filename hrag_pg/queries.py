"""The SQL statements the Python layer sends, shared by the sync and async repositories.

Each is one round trip calling a function from ``sql/``; parameters use
psycopg's ``%(name)s`` style and explicit casts (Python floats arrive as
``double precision``, the functions take ``real``).
"""

from __future__ import annotations

SEARCH_LEAVES = """
SELECT node_id, parent_id, document_id, score
  FROM hrag.search_leaves(%(q)s, %(k)s::int, %(c)s::text, %(f)s::jsonb)
"""

PARENT_CHILD = """
SELECT r.node_id, r.document_id, r.title, r.heading_path, r.content, r.score,
       r.matched_children, r.rank, n.depth, n.kind
  FROM hrag.parent_child(%(q)s, %(k)s::int, %(p)s::int, %(c)s::text, %(f)s::jsonb, %(m)s::real) AS r
  JOIN hrag.nodes n ON n.id = r.node_id
 ORDER BY r.rank
"""

AUTO_MERGE = """
SELECT r.*, n.kind
  FROM hrag.auto_merge(%(q)s, %(k)s::int, %(t)s::real, %(c)s::text, %(f)s::jsonb) AS r
  JOIN hrag.nodes n ON n.id = r.node_id
 ORDER BY r.rank
"""

AUTO_MERGE_HITS = """
SELECT r.*, n.kind
  FROM hrag.auto_merge_hits(%(ids)s::uuid[], %(scores)s::real[], %(t)s::real) AS r
  JOIN hrag.nodes n ON n.id = r.node_id
 ORDER BY r.rank
"""

PARENT_CHILD_HITS = """
SELECT r.node_id, r.document_id, r.title, r.heading_path, r.content, r.score,
       r.matched_children, r.rank, n.depth, n.kind
  FROM hrag.parent_child_hits(%(ids)s::uuid[], %(scores)s::real[], %(p)s::int) AS r
  JOIN hrag.nodes n ON n.id = r.node_id
 ORDER BY r.rank
"""

CHILD_TEXTS = """
SELECT n.id, n.heading_path, coalesce(n.metadata->>'question', n.content) AS content
  FROM hrag.nodes n
 WHERE n.id = ANY(%(ids)s::uuid[])
"""
