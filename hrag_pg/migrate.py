"""Apply, revert and inspect hrag's Alembic migrations from Python.

``hrag migrate`` and the test harness use this; users with their own Alembic
setup can equally run ``alembic upgrade head`` with the repository's
alembic.ini, which uses the same environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from . import db
from .errors import ConfigurationError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: ``revision = "0025"`` / ``down_revision = "0024"`` lines of a revision file.
_REVISION_LINE = re.compile(r"^(revision|down_revision)\s*=\s*['\"]?([^'\"\n]*?)['\"]?\s*$", re.MULTILINE)


def alembic_config(url: str | None = None, *, embedding_dim: int | None = None) -> Config:
    """An Alembic Config pointing at the packaged migrations and the given database."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    resolved = db.resolve_url(url)
    config.attributes["url"] = resolved
    if embedding_dim is not None:
        from .schema_sql import validate_dim

        config.attributes["embedding_dim"] = validate_dim(embedding_dim)
    return config


def upgrade(url: str | None = None, revision: str = "head", *, embedding_dim: int | None = None) -> None:
    """Bring the hrag schema up to ``revision`` (idempotent at head)."""
    from alembic import command

    with _alembic_errors(revision):
        command.upgrade(alembic_config(url, embedding_dim=embedding_dim), revision)
    _forget_pooled_connections(url)


def downgrade(url: str | None = None, revision: str = "base") -> None:
    """Revert to ``revision``; ``base`` removes everything hrag created."""
    from alembic import command

    with _alembic_errors(revision):
        command.downgrade(alembic_config(url), revision)
    _forget_pooled_connections(url)


def _forget_pooled_connections(url: str | None) -> None:
    """Close the process's pooled connections to this database after a migration.

    A connection opened before the migration created the ``vector`` extension
    has no pgvector adapters (they are registered when a connection opens), so
    reusing it would fail on the first vector; new connections register them.
    """
    db.engine(url).dispose()


@contextmanager
def _alembic_errors(revision: str) -> Iterator[None]:
    """Alembic's own refusals (an unknown revision, a wrong direction) as one clear sentence."""
    from alembic.util import CommandError

    try:
        yield
    except CommandError as exc:
        raise ConfigurationError(f"cannot migrate to revision {revision!r}: {exc}") from exc


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision, read from the revision files' own lines.

    Every command asks it (is the schema at head?), and importing Alembic to
    answer took most of a second of ``hrag sources``; a test checks the
    answer against Alembic's.
    """
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in (MIGRATIONS_DIR / "versions").glob("*.py"):
        found = dict(_REVISION_LINE.findall(path.read_text(encoding="utf-8")))
        if "revision" in found:
            revisions.add(found["revision"])
            parents.add(found.get("down_revision", ""))
    heads = revisions - parents
    if len(heads) != 1:
        raise ConfigurationError(f"the packaged migrations have {len(heads)} heads ({sorted(heads)}); reinstall")
    return heads.pop()


def _script_config() -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def revisions() -> list[str]:
    """Every revision id, oldest first (``base`` and ``head`` are aliases on top)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(_script_config())
    return [rev.revision for rev in reversed(list(script.walk_revisions()))]


def current_revision(conn: sa.Connection) -> str | None:
    """The revision recorded in ``hrag.alembic_version`` (None if not migrated)."""
    if conn.execute(sa.text("SELECT to_regclass('hrag.alembic_version')")).scalar() is None:
        return None
    return conn.execute(sa.text("SELECT version_num FROM hrag.alembic_version")).scalar()


@contextmanager
def translate_migration_error(url: str) -> Iterator[None]:
    """Turn the server's refusals during migration into one sentence with the fix.

    Errors arrive wrapped by SQLAlchemy (statements it ran) or raw from
    psycopg (the SQL files, which go through the driver directly).
    """
    import psycopg
    import psycopg.errors as pg

    try:
        yield
    except (sa.exc.DBAPIError, psycopg.Error) as exc:
        orig = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
        where = db.redact(url)
        text = str(orig).strip().splitlines()[0] if orig is not None and str(orig).strip() else ""
        # Only a missing extension is "no pgvector" (FeatureNotSupported on PostgreSQL >= 15,
        # UndefinedFile before); any other unsupported feature keeps its own message.
        if 'extension "vector"' in text and (
            isinstance(orig, pg.FeatureNotSupported | pg.UndefinedFile)
            or "not available" in text or "control file" in text
        ):
            raise ConfigurationError(
                f"The server at {where} has no pgvector extension ({text}): install pgvector >= 0.8 "
                "on it (or use the embedded server by unsetting HRAG_DATABASE_URL)."
            ) from exc
        if isinstance(orig, pg.InsufficientPrivilege):
            raise ConfigurationError(
                f"The user in {where} lacks a privilege hrag needs to migrate ({text}): "
                "run `hrag migrate` as the database owner, or GRANT CREATE ON DATABASE to this user "
                "and create the vector extension as a superuser first."
            ) from exc
        raise


# ------------------------------------------------------------------- policy
# What moving a database to a revision means, decided before anything runs:
# the CLI asks for confirmation on a downgrade and says what happened.


@dataclass(frozen=True)
class MigrationPlan:
    """Moving one database from ``current`` to ``target`` (None: not installed / base)."""

    url: str
    current: str | None
    target: str | None
    embedding_dim: int | None
    #: Documents and collections stored now (what a downgrade to base deletes).
    documents: int
    collections: int

    @property
    def direction(self) -> str:
        """"upgrade", "downgrade" or "none"."""
        known = revisions()
        position = {rev: i for i, rev in enumerate(known)}
        here = -1 if self.current is None else position.get(self.current, len(known))
        there = -1 if self.target is None else position[self.target]
        return "downgrade" if there < here else "upgrade" if there > here else "none"

    def downgrade_warning(self) -> str:
        """What a downgrade loses, in one sentence (for a confirmation)."""
        where = db.redact(self.url)
        if self.target is None:
            return (f"downgrading {where} to base removes hrag and deletes {_plural(self.documents, 'document')} "
                    f"in {_plural(self.collections, 'collection')}")
        return (f"downgrading {where} from {self.current} to {self.target} removes the features of the later "
                f"revisions ({_plural(self.documents, 'document')} stay stored)")


def plan(revision: str = "head", *, url: str | None = None, embedding_dim: int | None = None) -> MigrationPlan:
    """Check ``revision`` and ``embedding_dim`` against the database, and say what moving there means.

    ``revision`` is head, base or a revision id; a dimension other than the
    installed one is refused (it is fixed at the first migration), naming
    both and the ways out.
    """
    from .errors import HragError
    from .schema_sql import validate_dim

    known = revisions()
    aliases = {"head": known[-1], "base": None}
    if revision not in aliases and revision not in known:
        raise ValueError(f"unknown revision {revision!r}; choose head, base or one of {', '.join(known)}")
    if embedding_dim is not None:
        validate_dim(embedding_dim)
    resolved = db.resolve_url(url)
    db.check_reachable(resolved)
    with db.engine(resolved).connect() as conn:
        current = current_revision(conn)
        installed_dim = db.installed_embedding_dim(conn) if current is not None else None
        documents, collections = _stored(conn)
    if embedding_dim is not None and installed_dim is not None and embedding_dim != installed_dim:
        raise HragError(
            f"this database stores {installed_dim}-dimensional vectors; the dimension is fixed when hrag is "
            f"first installed. To use {embedding_dim}: migrate a new, empty database with --embedding-dim "
            f"{embedding_dim}, or remove hrag here first (`hrag migrate base --yes`, deletes every document)"
        )
    return MigrationPlan(resolved, current, aliases.get(revision, revision), embedding_dim, documents, collections)


def carry_out(migration: MigrationPlan) -> str | None:
    """Run the plan; the revision the database is at afterwards."""
    if migration.direction == "downgrade":
        downgrade(migration.url, migration.target or "base")
    elif migration.direction == "upgrade":
        upgrade(migration.url, migration.target or "head", embedding_dim=migration.embedding_dim)
    with db.engine(migration.url).connect() as conn:
        return current_revision(conn)


def _stored(conn: sa.Connection) -> tuple[int, int]:
    """(documents, collections) stored, or (0, 0) before the first migration."""
    if conn.execute(sa.text("SELECT to_regclass('hrag.documents')")).scalar() is None:
        return 0, 0
    row = conn.execute(sa.text("SELECT count(*), count(DISTINCT collection) FROM hrag.documents")).one()
    return int(row[0]), int(row[1])


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word if count == 1 else word + 's'}"
