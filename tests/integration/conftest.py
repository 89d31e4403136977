"""Fixtures shared by the tests of writes: a plain connection, and three documents stored under one model."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from pgvector.psycopg import register_vector

from hrag_pg import db
from hrag_pg.api import HRAG
from tests.embedders import HashingEmbedder
from tests.stored_rows import DOCS


@pytest.fixture
def sql(db_url: str) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the test's database, reading vectors as numpy arrays."""
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        register_vector(conn)
        yield conn


@pytest.fixture
def stored(db_url: str) -> HRAG:
    """The three fixture documents in collection ``c``, embedded by the plain hashing model."""
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    report = hrag.ingest(DOCS, collection="c")
    assert not report.failed and len(report.results) == 3
    return hrag
