"""Shared fixtures of the reliability and security suite.

The ``sql`` (autocommit psycopg connection), ``embedder`` (HashingEmbedder)
and ``hrag`` (HRAG on the test's fresh database) fixtures are the ones of
tests/integration/test_ingest_write.py, re-exported here so every file of
this suite uses the same helpers.
"""

from __future__ import annotations

from tests.integration.test_ingest_write import embedder, hrag, sql  # noqa: F401 - fixtures
