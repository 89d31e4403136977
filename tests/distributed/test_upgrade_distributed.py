"""Upgrading an install that is already distributed: revision 0012's new budget steps are delegated too.

Revision 0012 replaced the budget mode's per-document rows step with one of another signature.  On a
distributed install the old one was a distributed function; the new one must be as well, or every call
would run on the coordinator and fan out.  This runs last in the session (the module sorts after
test_citus.py): it takes the session's distributed database down to 0011 and back to head.
"""

from __future__ import annotations

import psycopg

from hrag_pg import db, migrate

OLD = "hrag._budget_rows_document(uuid, uuid[], text[], uuid[], real[], boolean)"
NEW = "hrag._budget_rows_document(uuid, uuid[], text[], integer[], uuid[], real[], boolean)"


def _delegated(conn: psycopg.Connection, signature: str) -> bool:
    """Whether a function of this signature exists and is a force-delegated distributed function."""
    if conn.execute("SELECT to_regprocedure(%s)", (signature,)).fetchone() == (None,):
        return False
    row = conn.execute("SELECT count(*) FROM pg_dist_object WHERE objid = %s::regprocedure "
                       "AND distribution_argument_index IS NOT NULL AND force_delegation", (signature,)).fetchone()
    return row == (1,)


def test_upgrading_a_distributed_install_delegates_the_new_budget_steps(cluster_url: str) -> None:
    libpq = db.libpq_url(cluster_url)
    with psycopg.connect(libpq, autocommit=True) as conn:
        assert _delegated(conn, NEW)
    migrate.downgrade(cluster_url, "0011")
    try:
        with psycopg.connect(libpq, autocommit=True) as conn:
            assert _delegated(conn, OLD), "the downgrade delegates the old rows step again"
            assert not _delegated(conn, NEW)
    finally:
        migrate.upgrade(cluster_url)
    with psycopg.connect(libpq, autocommit=True) as conn:
        assert _delegated(conn, NEW), "the upgrade delegates the new rows step"
        assert not _delegated(conn, OLD)
        hits = conn.execute("SELECT array_agg(id), array_agg(0.5::real) FROM (SELECT id FROM hrag.nodes "
                            "WHERE embedding IS NOT NULL ORDER BY id LIMIT 8) AS h").fetchone()
        assert hits is not None
        if hits[0]:  # the session's earlier tests ingested documents: the budget mode still answers
            rows = conn.execute("SELECT node_id, reason FROM hrag.retrieve_hits(%s::uuid[], %s::real[], 2000)",
                                hits).fetchall()
            assert rows
