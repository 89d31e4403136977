"""Distributing an installation over a Citus cluster (``hrag distribute``).

The work is done by the SQL function ``hrag.distribute()`` (revision 0009),
so psql users run the same thing; this module adds the checks a command
line needs (migrated first, Citus present) as one-sentence errors.  See
docs/scaling.md for the deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import sqlalchemy as sa

from . import db, migrate
from .errors import ConfigurationError, SchemaError


@dataclass(frozen=True)
class Distributed:
    """One row of ``hrag.distribute()``: a table (or function) and what was done to it."""

    name: str
    distribution: str
    action: str  # "distributed" or "already distributed"


def distribute(url: str | None = None, *, shard_count: int | None = None) -> list[Distributed]:
    """Distribute documents and nodes by document over the Citus cluster at ``url`` (idempotent)."""
    resolved = db.resolve_url(url)
    engine = db.engine(resolved)
    with engine.connect() as conn:
        current = migrate.current_revision(conn)
        has_citus = conn.execute(sa.text("SELECT 1 FROM pg_extension WHERE extname = 'citus'")).scalar()
    if current != migrate.head_revision():
        raise SchemaError(
            f"The database's hrag schema is at revision {current or 'none'}, not {migrate.head_revision()}: "
            "run `hrag migrate` before `hrag distribute`."
        )
    if not has_citus:
        raise ConfigurationError(
            f"The server at {db.redact(resolved)} has no Citus extension, so there is nothing to distribute "
            "over: run `hrag distribute` against a Citus coordinator (see docs/scaling.md)."
        )
    try:
        with engine.begin() as conn:
            rows = conn.execute(sa.text("SELECT * FROM hrag.distribute(:n)"), {"n": shard_count}).all()
    except sa.exc.DBAPIError as exc:
        orig = exc.orig
        if isinstance(orig, psycopg.Error) and orig.diag.message_primary:
            raise ConfigurationError(f"hrag.distribute() failed: {orig.diag.message_primary}") from exc
        raise
    return [Distributed(*row) for row in rows]
