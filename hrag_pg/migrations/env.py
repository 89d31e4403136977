"""Alembic environment for hrag-pg.

Works the same from ``alembic upgrade head`` (with the repository's
alembic.ini), from ``hrag migrate`` and from :mod:`hrag_pg.migrate`:

* the database is ``sqlalchemy.url`` if set, else ``HRAG_DATABASE_URL``,
  else the embedded server;
* the embedding dimension is ``-x embedding_dim=N``, else
  ``HRAG_EMBEDDING_DIM``, else 384 (it only matters for the first upgrade);
* the version table lives in the ``hrag`` schema, so a database with its own
  ``public.alembic_version`` is never touched;
* on a database without hrag, an upgrade to head is a fresh install: the
  topic files in ``sql/`` create the head schema directly and the version
  table is stamped with head (:func:`_fresh_install_to_head`); any other
  upgrade runs the revisions, whose frozen files are in ``sql/revisions/``;
* once the last revision is downgraded, the version table and the then empty
  ``hrag`` schema are dropped too, leaving nothing of hrag behind.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

from hrag_pg import db, schema_sql
from hrag_pg.migrate import translate_migration_error

SCHEMA = "hrag"
VERSION_TABLE = "alembic_version"
# One constant key for the advisory lock that serialises concurrent migrations.
MIGRATION_LOCK_KEY = 0x68726167  # "hrag"

config = context.config


def _embedding_dim() -> int:
    x_args = context.get_x_argument(as_dictionary=True)
    value = (
        x_args.get("embedding_dim")
        or config.attributes.get("embedding_dim")
        or os.environ.get("HRAG_EMBEDDING_DIM")
        or schema_sql.DEFAULT_EMBEDDING_DIM
    )
    return schema_sql.validate_dim(value)


def _url() -> str:
    configured = config.get_main_option("sqlalchemy.url")
    return db.resolve_url(configured or None)


def _drop_schema_if_only_versions_remain(conn: sa.Connection) -> None:
    if conn.execute(sa.text("SELECT to_regclass('hrag.alembic_version')")).scalar() is None:
        return
    if conn.execute(sa.text("SELECT count(*) FROM hrag.alembic_version")).scalar():
        return
    others = conn.execute(
        sa.text(
            """
            SELECT (SELECT count(*) FROM pg_class
                     WHERE relnamespace = 'hrag'::regnamespace
                       AND relname NOT IN ('alembic_version', 'alembic_version_pkc'))
                 + (SELECT count(*) FROM pg_proc WHERE pronamespace = 'hrag'::regnamespace)
                 + (SELECT count(*) FROM pg_type WHERE typnamespace = 'hrag'::regnamespace
                       AND typrelid = 0 AND typelem = 0)
            """
        )
    ).scalar()
    if others == 0:
        conn.execute(sa.text("DROP TABLE hrag.alembic_version"))
        conn.execute(sa.text("DROP SCHEMA hrag"))


def _fresh_install_to_head(conn: sa.Connection) -> bool:
    """Is this an upgrade to head on a database where hrag is not installed?

    Then the head schema is created from the topic files in one step instead
    of replaying every revision (the baseline revision, Django's "replaces"):
    same catalog, checked by tests/migration/test_fresh_install.py.  An
    upgrade to an earlier revision still runs the chain.
    """
    env = context.get_context().environment_context
    assert env is not None
    # command.upgrade's work function is named "upgrade"; stamp and downgrade never install.
    if getattr(env.context_opts.get("fn"), "__name__", None) != "upgrade":
        return False
    head = env.script.get_current_head()
    destination = context.get_revision_argument()
    destinations = destination if isinstance(destination, tuple) else (destination,)
    if head is None or destinations != (head,):
        return False
    installed = conn.execute(sa.text("SELECT to_regclass('hrag.config') IS NOT NULL")).scalar()
    return not installed and not context.get_context().get_current_heads()


def run_migrations_online() -> None:
    config.attributes["embedding_dim"] = _embedding_dim()
    url = config.attributes.get("url") or _url()
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn, translate_migration_error(url):
            conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_KEY})
            conn.commit()
            try:
                conn.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}"))
                context.configure(
                    connection=conn,
                    version_table=VERSION_TABLE,
                    version_table_schema=SCHEMA,
                    transactional_ddl=True,
                )
                with context.begin_transaction():
                    if _fresh_install_to_head(conn):
                        schema_sql.install(conn, embedding_dim=config.attributes["embedding_dim"])
                        context.get_context().stamp(context.script, "head")
                    context.run_migrations()
                    _drop_schema_if_only_versions_remain(conn)
                conn.commit()
            finally:
                conn.rollback()
                conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_KEY})
                conn.commit()
    except sa.exc.OperationalError as exc:
        if exc.statement is None:
            raise db.connection_error(url, exc) from exc
        raise
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise SystemExit("hrag-pg migrations need a live database (online mode); offline SQL is not supported.")
run_migrations_online()
