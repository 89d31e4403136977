"""Build small node trees directly in SQL with hand-made vectors (exact similarities).

A tree is written as nested tuples ``(key, kind, content, embedding, children)``;
``embedding`` is None or a dict {axis: weight} turned into a unit vector, so
the similarity between a query on the same axes is exact and predictable.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

DIM = 384


def unit(axes: dict[int, float] | Sequence[float], dim: int = DIM) -> np.ndarray:
    """A unit vector with the given weights on the given axes."""
    v = np.zeros(dim, dtype=np.float32)
    if isinstance(axes, dict):
        for axis, weight in axes.items():
            v[axis] = weight
    else:
        v[: len(axes)] = axes
    return v / np.linalg.norm(v)


@dataclass
class Spec:
    key: str
    content: str = ""
    embedding: dict[int, float] | np.ndarray | None = None
    children: list[Spec] = field(default_factory=list)
    kind: str = "section"
    metadata: dict | None = None
    #: Stored token count of the node's own text (default: its number of words).
    tokens: int | None = None

    @property
    def own_tokens(self) -> int:
        return self.tokens if self.tokens is not None else len(self.content.split())


@dataclass
class Built:
    document_id: uuid.UUID
    ids: dict[str, uuid.UUID]


def insert_tree(
    conn: psycopg.Connection, root: Spec, *, source: str | None = None, collection: str = "default",
    doc_metadata: dict | None = None,
) -> Built:
    """Insert one document with the tree rooted at ``root``; returns ids by key."""
    register_vector(conn)
    doc_id = uuid.uuid4()
    conn.execute(
        "INSERT INTO hrag.documents (id, collection, source, title, content_hash, metadata) "
        "VALUES (%s, %s, %s, %s, 'test', %s)",
        (doc_id, collection, source or f"{root.key}-{doc_id}", root.key,
         psycopg.types.json.Jsonb(doc_metadata or {})),
    )
    ids: dict[str, uuid.UUID] = {}
    rows: list[tuple] = []
    counter = [0]

    def visit(spec: Spec, parent: uuid.UUID | None, depth: int, position: int, path: list[str]) -> int:
        """Appends the subtree's rows; returns its token total."""
        node_id = uuid.uuid4()
        ids[spec.key] = node_id
        seq = counter[0]
        counter[0] += 1
        row_index = len(rows)
        rows.append(())  # placeholder until subtree_end is known
        subtree_tokens = spec.own_tokens if spec.content else 0
        for i, child in enumerate(spec.children):
            subtree_tokens += visit(child, node_id, depth + 1, i, [*path, spec.key])
        subtree_end = counter[0] - 1
        emb = spec.embedding
        if isinstance(emb, dict):
            emb = unit(emb)
        rows[row_index] = (
            node_id, doc_id, collection, parent, depth, position, spec.kind, spec.key, path,
            spec.content, len(spec.children), seq, subtree_end, "h", emb,
            psycopg.types.json.Jsonb(spec.metadata or {}), spec.own_tokens if spec.content else 0, subtree_tokens,
        )
        return subtree_tokens

    visit(root, None, 0, 0, [])
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO hrag.nodes (id, document_id, collection, parent_id, depth, position, kind, title,
                   heading_path, content, child_count, seq, subtree_end, content_hash, embedding, metadata,
                   token_count, subtree_tokens)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            rows,
        )
        cur.execute("SELECT hrag.refresh_document_terms(%s)", (doc_id,))
    return Built(doc_id, ids)
