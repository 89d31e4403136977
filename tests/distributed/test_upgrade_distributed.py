"""Upgrading an install that is already distributed: revision 0012's new budget steps are delegated too.

On the way back to head the cluster's rows also pass through revision 0023, which rebuilds the stored
lexical terms of hrag.nodes (a propagated ALTER TABLE) both ways.

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
        # revision 0023 rebuilt the stored terms on every shard, with its identifier terms
        stale = conn.execute("SELECT count(*) FROM hrag.nodes n WHERE n.lexical_terms IS DISTINCT FROM "
                             "CASE WHEN n.embedding IS NOT NULL THEN hrag.node_lexical_terms("
                             "n.heading_path, n.content, n.metadata) END").fetchone()
        assert stale == (0,), "stored terms the upgrade did not recompute"
        assert conn.execute("SELECT hrag.lexical_terms('wait_for')").fetchone() == (["wait", "wait_for"],)
        hits = conn.execute("SELECT array_agg(id), array_agg(0.5::real) FROM (SELECT id FROM hrag.nodes "
                            "WHERE embedding IS NOT NULL ORDER BY id LIMIT 8) AS h").fetchone()
        assert hits is not None
        if hits[0]:  # the session's earlier tests ingested documents: the budget mode still answers
            rows = conn.execute("SELECT node_id, reason FROM hrag.retrieve_hits(%s::uuid[], %s::real[], 2000)",
                                hits).fetchall()
            assert rows
