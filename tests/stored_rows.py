"""What a collection stores per node, and what a fresh ingest would store: the tests of writes compare the two.

A node's row is compared as (vector, token count, subtree tokens, content
hash): equal rows mean the stored tree is exactly one fresh ingest of a file
with one model, whole, and nothing of another version or model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from hrag_pg.api import model_key
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: An English guide and two Japanese policies, the collection ``c`` of the tests of writes.
DOCS = [FIXTURES / "guide.md", FIXTURES / "work_rules_ja.md", FIXTURES / "security_policy_ja.md"]

def node_rows(sql: psycopg.Connection, collection: str = "c") -> dict[Any, tuple[Any, ...]]:
    """Every stored node of ``collection`` by id: (vector, token count, subtree tokens, content hash)."""
    return {r[0]: r[1:] for r in sql.execute(
        "SELECT n.id, n.embedding, n.token_count, n.subtree_tokens, n.content_hash FROM hrag.nodes n "
        "WHERE n.collection = %s", (collection,))}


def recorded_model(sql: psycopg.Connection, collection: str = "c") -> tuple[Any, ...] | None:
    """The collection's model record: model, dimension, fingerprint, prompts, and the model a reembed switches to."""
    return sql.execute("SELECT model, dimension, fingerprint, query_prompt, passage_prompt, next_model "
                       "FROM hrag.collection_models WHERE collection = %s", (collection,)).fetchone()


def expected_rows(path: Path, embedder: Any) -> dict[Any, tuple[Any, ...]]:
    """What a fresh ingest of ``path`` with ``embedder`` stores: vector, token counts, content hash per node."""
    doc = prepare_file(path, IngestOptions(), collection="c", model_name=model_key(embedder),
                       counter=embedder.token_counter)
    return {n.id: (embedder.vector(n.embed_text) if n.embed_text is not None else None,
                   n.token_count, n.subtree_tokens, n.content_hash) for n in doc.nodes}


def assert_rows_equal(actual: dict[Any, tuple[Any, ...]], expected: dict[Any, tuple[Any, ...]]) -> None:
    """The same nodes, each with the same counts and hash and (within float error) the same vector."""
    assert actual.keys() == expected.keys(), (f"{len(actual.keys() - expected.keys())} nodes stored that a fresh "
                                              f"ingest would not write, {len(expected.keys() - actual.keys())} missing")
    for node_id, (vector, *rest) in expected.items():
        stored_vector, *stored_rest = actual[node_id]
        assert stored_rest == rest, f"node {node_id}: token counts and hash {stored_rest}, a fresh ingest's {rest}"
        assert (stored_vector is None) == (vector is None), f"node {node_id}: a vector where none belongs, or none"
        if vector is not None:
            np.testing.assert_allclose(stored_vector.to_numpy(), vector, atol=1e-6,
                                       err_msg=f"node {node_id}: not the vector a fresh ingest would store")


