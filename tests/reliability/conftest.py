"""Shared fixtures of the reliability and security suite.

The ``sql`` (autocommit psycopg connection, tests/integration/conftest.py),
``embedder`` (HashingEmbedder) and ``hrag`` (HRAG on the test's fresh
database, tests/integration/test_ingest_write.py) fixtures, re-exported here
so every file of this suite uses the same helpers.
"""

from __future__ import annotations

from tests.integration.conftest import sql  # noqa: F401 - fixtures
from tests.integration.test_ingest_write import embedder, hrag  # noqa: F401 - fixtures
