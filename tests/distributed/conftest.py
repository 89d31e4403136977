"""A Citus cluster (coordinator + 2 workers) for the session, migrated and distributed once.

Skipped, with the reason, when this machine has neither a cached Citus build
nor the Citus source to build one (see tests/distributed/cluster.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from hrag_pg import db, migrate
from tests.distributed.cluster import CitusCluster, CitusUnavailable, find_or_build


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[CitusCluster]:
    try:
        prefix = find_or_build()
    except CitusUnavailable as exc:
        pytest.skip(f"distributed tests need Citus: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs' XDG_RUNTIME_DIR warning as root
        cluster = CitusCluster(prefix, workers=2)
    try:
        yield cluster.start()
    finally:
        db._engine_for.cache_clear()
        cluster.stop()


@pytest.fixture(scope="session")
def cluster_url(citus_cluster: CitusCluster) -> str:
    """The coordinator's URL, with hrag migrated to head and distributed (4 shards: quick to create)."""
    url = citus_cluster.url()
    migrate.upgrade(url)
    with db.engine(url).begin() as conn:
        conn.exec_driver_sql("SELECT * FROM hrag.distribute(4)")
    return url
