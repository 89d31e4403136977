"""Switching a collection to another embedding model in place (``hrag reembed``).

The tree stays as it is (same nodes, same ids, same text); what depends on
the model is computed again from the stored rows: each search target's
vector, every node's token count (the collection's own tokenizer: a budget
is counted in the tokens of the model that reads it) and the content hashes
that let a later re-ingest keep the new vectors.

Two phases, so a reader never sees two models in one collection:

1. **Prepare**, one document per transaction: the new values go to
   ``hrag.reembed_documents`` / ``hrag.reembed_nodes`` beside the old ones.
   A run killed half-way resumes here: documents already prepared for the
   same model, and not written since, are skipped.
2. **Switch**: ``hrag.finish_reembed`` swaps them in for the whole
   collection and records the new model, in one transaction.  Documents
   written in the meantime (by an ingest with the old model) make it
   refuse; they are prepared again and the switch retried.

The embedded text of a leaf is rebuilt as ingestion builds it (heading path
of its parent, the overlap a split paragraph's later pieces carry, its
content), so it hashes as a fresh ingest with the new model would.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
import sqlalchemy as sa
from pgvector import Vector

from . import collection_model, statements
from .embedding import Embedder, ModelIdentity, identity_of
from .errors import HragError
from .ingest.flatten import _sha, document_hash, embedding_text
from .ingest.tokens import CachedCounter, TokenCounter, tail_tokens

#: The overlap ingestion embeds with each later piece of a split paragraph (``IngestOptions.overlap_tokens``).
OVERLAP_TOKENS = 25
#: How often the switch is retried after documents were written while it was prepared.
SWITCH_ATTEMPTS = 5

Progress = Callable[[str, int, int], None]


@dataclass
class ReembedReport:
    """What a reembed did."""

    collection: str
    model: str
    previous_model: str
    documents: int = 0
    prepared: int = 0
    resumed: int = 0
    embedded: int = 0
    switched: int = 0
    seconds: float = 0.0
    status: str = "switched"


@dataclass
class _Row:
    id: uuid.UUID
    parent_id: uuid.UUID | None
    kind: str
    heading_path: list[str]
    content: str
    separator: str
    metadata: dict[str, Any]
    seq: int
    subtree_end: int
    is_target: bool
    content_hash: str


def _search_text(row: _Row) -> str:
    # A "qa" leaf is searched by its generated question, kept in its metadata.
    return str(row.metadata.get("question", "")) if row.kind == "qa" else row.content


def new_values(rows: list[_Row], counter: TokenCounter, model_key: str) -> tuple[
        dict[uuid.UUID, tuple[int, int, str]], dict[uuid.UUID, str]]:
    """Per node (token_count, subtree_tokens, content_hash), and per search target the text to embed.

    The same computation as :func:`hrag_pg.ingest.flatten.flatten`, on stored rows.
    """
    by_id = {r.id: r for r in rows}
    counts = {r.id: counter.count(_search_text(r)) if _search_text(r) else 0 for r in rows}
    separator_tokens = {r.seq: counter.count(r.separator) for r in rows if r.separator.strip()}
    embed_texts: dict[uuid.UUID, str] = {}
    previous_sibling: dict[uuid.UUID | None, _Row] = {}
    for r in rows:  # pre-order
        before = previous_sibling.get(r.parent_id)
        previous_sibling[r.parent_id] = r
        if not r.is_target:
            continue
        overlap = ""
        part = r.metadata.get("part")
        if isinstance(part, int) and part > 1 and before is not None and before.metadata.get("part") == part - 1:
            overlap = tail_tokens(before.content, OVERLAP_TOKENS, counter)
        parent_path = by_id[r.parent_id].heading_path if r.parent_id in by_id else []
        embed_texts[r.id] = embedding_text(list(parent_path), overlap, _search_text(r))
    # A subtree is a range of seq: its tokens are its texts' counts plus the separators between them
    # (each text's but the first's), summed from running totals in one pass, not once per node.
    counted = [0]
    separated = [0]
    for x in rows:
        counted.append(counted[-1] + (counts[x.id] if x.content else 0))
        separated.append(separated[-1] + (separator_tokens.get(x.seq, 0) if x.content else 0))
    first_text: list[int | None] = [None] * (len(rows) + 1)  # the first seq >= i holding text
    for x in reversed(rows):
        first_text[x.seq] = x.seq if x.content else first_text[x.seq + 1]
    values: dict[uuid.UUID, tuple[int, int, str]] = {}
    for r in rows:
        end = r.subtree_end + 1
        subtree = counted[end] - counted[r.seq] + separated[end] - separated[r.seq]
        first = first_text[r.seq]
        if first is not None and first < end:
            subtree -= separator_tokens.get(first, 0)
        # (a structural node's hash covers its text, not the model: it stays)
        content_hash = _sha("embed", model_key, embed_texts[r.id]) if r.id in embed_texts else r.content_hash
        values[r.id] = (counts[r.id], subtree, content_hash)
    return values, embed_texts


class Reembedder:
    """Prepares and switches one collection (see the module docstring)."""

    def __init__(self, engine: sa.Engine, collection: str, embedder: Embedder, model_key: str,
                 progress: Progress | None = None) -> None:
        self.engine = engine
        self.collection = collection
        self.embedder = embedder
        self.identity = identity_of(embedder)
        self.model_key = model_key
        self.progress = progress

    def run(self, current: ModelIdentity) -> ReembedReport:
        started = time.perf_counter()
        report = ReembedReport(self.collection, self.identity.name, current.name)
        with self.engine.begin() as conn:
            collection_model.start_switch(conn, self.collection, self.identity)
        for _attempt in range(SWITCH_ATTEMPTS):
            self._prepare_all(report)
            try:
                with self.engine.begin() as conn:
                    report.switched = int(conn.execute(sa.text(statements.FINISH_REEMBED),
                                                       {"c": self.collection}).scalar() or 0)
                break
            except sa.exc.DBAPIError as exc:
                if not isinstance(exc.orig, psycopg.errors.SerializationFailure):
                    raise
        else:
            raise HragError(f"collection {self.collection!r} kept changing while it was re-embedded "
                            f"({SWITCH_ATTEMPTS} attempts); run `hrag reembed` again when ingestion is quiet")
        report.seconds = time.perf_counter() - started
        return report

    def _prepare_all(self, report: ReembedReport) -> None:
        with self.engine.connect() as conn:
            documents = conn.execute(sa.text(statements.REEMBED_DOCUMENTS),
                                     {"c": self.collection, "fp": self.identity.fingerprint}).all()
        report.documents = len(documents)
        todo = [d for d in documents if not d.ready]
        report.resumed = max(report.resumed, report.documents - len(todo) - report.prepared)
        for done, document in enumerate(todo, start=1):
            report.embedded += self._prepare(document.id, document.source)
            report.prepared += 1
            if self.progress:
                self.progress("reembed", done, len(todo))

    def _prepare(self, document_id: uuid.UUID, source: str) -> int:
        """One document's new values, in one transaction; returns the texts embedded."""
        with self.engine.begin() as conn:
            # the writers' lock on this source: a concurrent ingest of it waits, or we wait for it
            conn.execute(sa.text(statements.LOCK_SOURCE), {"key": f"hrag\x1f{self.collection}\x1f{source}"})
            document = conn.execute(sa.text(statements.DOCUMENT_HASH_TITLE_AND_METADATA),
                                    {"id": document_id}).first()
            if document is None:
                return 0  # deleted meanwhile
            rows = [_Row(r.id, r.parent_id, r.kind, list(r.heading_path), r.content, r.separator, r.metadata,
                         r.seq, r.subtree_end, r.is_target, r.content_hash)
                    for r in conn.execute(sa.text(statements.REEMBED_SOURCE_NODES), {"id": document_id})]
            counter = CachedCounter(self.embedder.token_counter)
            values, embed_texts = new_values(rows, counter, self.model_key)
            unique = list(dict.fromkeys(embed_texts.values()))
            vectors = dict(zip(unique, self.embedder.embed(unique), strict=True)) if unique else {}
            root = rows[0] if rows else None
            conn.execute(sa.text(statements.DELETE_PREPARED_DOCUMENT), {"id": document_id})
            # the hash a fresh ingest with the new model would give, so re-ingesting it finds it unchanged
            new_hash = document_hash(document.title, document.metadata,
                                     [(r.id, r.parent_id, values[r.id][2], r.separator, r.metadata) for r in rows])
            conn.execute(
                sa.text(statements.INSERT_PREPARED_DOCUMENT),
                {"id": document_id, "c": self.collection, "fp": self.identity.fingerprint,
                 "h": document.content_hash, "new": new_hash, "t": values[root.id][1] if root else 0})
            driver = conn.connection.driver_connection
            assert isinstance(driver, psycopg.Connection)
            with driver.cursor() as cur:
                cur.executemany(
                    statements.INSERT_PREPARED_NODES,
                    [(document_id, r.id, self.collection,
                      Vector(vectors[embed_texts[r.id]]) if r.id in embed_texts else None,
                      *values[r.id]) for r in rows])
        return len(unique)
