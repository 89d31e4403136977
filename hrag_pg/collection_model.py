"""Which embedding model each collection's vectors come from (``hrag.collection_models``).

A collection records its model the first time a document is written to it;
from then on an ingest or a query with another model is refused, naming both
models and the fix (``hrag reembed``).  Writers read the record ``FOR SHARE``
in their own transaction, so a reembed's switch (``hrag.finish_reembed``,
which takes it ``FOR UPDATE``) and a write never cross.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from . import statements
from .embedding import ModelIdentity
from .errors import ModelMismatchError


def _identity(row: Any) -> ModelIdentity:
    return ModelIdentity(row.model, int(row.dimension), row.fingerprint, row.query_prompt, row.passage_prompt)


def as_json(identity: ModelIdentity) -> dict[str, Any]:
    """The record's keys (``next_model`` and the ``--json`` outputs use them)."""
    return {"model": identity.name, "dimension": identity.dimension, "fingerprint": identity.fingerprint,
            "query_prompt": identity.query_prompt, "passage_prompt": identity.passage_prompt}


def from_json(value: dict[str, Any]) -> ModelIdentity:
    return ModelIdentity(str(value["model"]), int(value["dimension"]), str(value.get("fingerprint", "")),
                         str(value.get("query_prompt", "")), str(value.get("passage_prompt", "")))


def recorded(conn: sa.Connection, collections: Sequence[str] | None = None) -> dict[str, ModelIdentity]:
    """The recorded model of each given collection (all visible ones for None) that has one."""
    rows = conn.execute(
        sa.text(statements.RECORDED_MODELS), {"c": list(collections) if collections is not None else None}
    ).all()
    return {r.collection: _identity(r) for r in rows}


def pending(conn: sa.Connection, collection: str) -> ModelIdentity | None:
    """The model an unfinished reembed of ``collection`` switches to, if one is under way."""
    value = conn.execute(sa.text(statements.PENDING_MODEL), {"c": collection}).scalar()
    return from_json(value) if value else None


def mismatch(collection: str, stored: ModelIdentity, asked: ModelIdentity, doing: str) -> ModelMismatchError:
    """The one-line refusal: both models and the two ways out."""
    return ModelMismatchError(
        f"collection {collection!r} was embedded with {stored.describe()}, but this {doing} uses "
        f"{asked.describe()}; use --model {stored.name} (HRAG(model=...)), or switch the collection with "
        f"`hrag reembed -c {collection} --model {asked.name}`"
    )


def claim(conn: sa.Connection, collection: str, identity: ModelIdentity) -> ModelIdentity:
    """Record ``identity`` for a collection that has no model yet; refuse a write with another model.

    Runs in the writer's transaction: the record is read ``FOR SHARE`` so the
    write and a reembed's switch are serialised.
    """
    # A collection emptied of documents starts afresh: its old record goes.
    # (two statements: on Citus the documents are distributed and the records a reference table)
    if not conn.execute(sa.text(statements.COLLECTION_HAS_DOCUMENTS), {"c": collection}).scalar():
        conn.execute(sa.text(statements.FORGET_MODEL_OF_EMPTY_COLLECTION), {"c": collection})
    conn.execute(sa.text(statements.RECORD_MODEL), {"c": collection, **as_json(identity)})
    row = conn.execute(sa.text(statements.CLAIMED_MODEL), {"c": collection}).one()
    stored = _identity(row)
    if not stored.matches(identity):
        raise mismatch(collection, stored, identity, "ingest")
    return stored


def start_switch(conn: sa.Connection, collection: str, target: ModelIdentity) -> None:
    """Mark ``collection`` as switching to ``target`` (a reembed under way; resumable)."""
    conn.execute(sa.text(statements.START_MODEL_SWITCH), {"c": collection, "t": json.dumps(as_json(target))})


def cancel_switch(conn: sa.Connection, collection: str) -> None:
    """Forget an unfinished reembed: its prepared vectors and the target model."""
    conn.execute(sa.text(statements.DELETE_PREPARED_COLLECTION), {"c": collection})
    conn.execute(sa.text(statements.CANCEL_MODEL_SWITCH), {"c": collection})
