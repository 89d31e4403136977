"""Model-backed fixtures: one database with the bundled examples, ingested once per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_postgresql.executors import NoopExecutor

from hrag_pg import demo
from hrag_pg.api import HRAG
from tests.conftest import TEMPLATE_DB, create_database, drop_database, url_for


@pytest.fixture(scope="module")
def examples_url(hrag_pg_proc: NoopExecutor, request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated database holding the demo's examples (hr, security, manual collections)."""
    name = f"hrag_examples_{request.module.__name__.rsplit('.', 1)[-1]}"
    create_database(hrag_pg_proc, name, template=TEMPLATE_DB)
    url = url_for(hrag_pg_proc, name)
    demo.ingest_examples(HRAG(url))
    yield url
    from hrag_pg import db

    db._engine_for.cache_clear()
    drop_database(hrag_pg_proc, name)


@pytest.fixture(scope="module")
def hrag(examples_url: str) -> HRAG:
    return HRAG(examples_url)
