"""Regenerate ``sql/schema.sql``: the whole head schema, readable in one place.

The revision files in ``sql/`` stay the upgrade path; once a revision
redefines a function, nobody can read the current definition from them.
``schema.sql`` is therefore *generated* (never edited by hand) from a
database migrated to head, with the embedded server's ``pg_dump``::

    python -m hrag_pg.schema_dump            # or: make schema

By default a throwaway embedded PostgreSQL is started in a temporary
directory, a scratch database is migrated to head with the default
embedding dimension (384: the ``{{embedding_dim}}`` placeholder rendered)
and dumped; ``--url`` dumps an existing database already at head instead.
``tests/migration/test_schema_file.py`` checks the file is current and that
applying it yields the same catalog as migrating.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from . import schema_sql
from .errors import HragError

#: The committed file is PostgreSQL 18's pg_dump output (the form differs by major).
PG_MAJOR = 18
SCHEMA = "hrag"
OUTPUT = Path(__file__).resolve().parent / "sql" / schema_sql.HEAD_SCHEMA_FILE

_HEADER = f"""\
-- hrag-pg: the head schema in one place. GENERATED: do not edit by hand.
--
-- The revision files beside this one stay the upgrade path; this file is what
-- a database migrated to head contains: pg_dump {PG_MAJOR} --schema-only
-- --schema={SCHEMA} --no-owner (privileges kept), embedding dimension {schema_sql.DEFAULT_EMBEDDING_DIM}.
-- After adding a revision, regenerate it with `python -m hrag_pg.schema_dump`
-- (or `make schema`). Applying it to an empty database gives the same catalog
-- as migrating (tests/migration/test_schema_file.py); the hrag.config row and
-- the Alembic version number are data, written by the migrations.

-- pgvector lives outside schema {SCHEMA}, so pg_dump --schema={SCHEMA} does not list it.
CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public;

-- pg_dump orders functions before the tables their bodies read.
SET check_function_bodies = false;
"""

# Session settings, psql meta-commands (\restrict with its random key) and
# version banners: noise that changes between runs or minor versions.
_NOISE = re.compile(
    r"^(SET \w+ = .*;|SELECT pg_catalog\.set_config\(.*\);|\\(un)?restrict \S+"
    r"|-- Dumped (from database|by pg_dump) version .*|--\n-- PostgreSQL database dump( complete)?\n--)\n",
    re.MULTILINE,
)
# pg_dump frames each object as "--\n-- Name: x; Type: T; Schema: s; Owner: -\n--\n".
_OBJECT_HEADER = re.compile(r"^--\n-- Name: (.*?); Type: (.*?); Schema: .*?; Owner: .*\n--\n\n?", re.MULTILINE)


class SchemaDumpError(RuntimeError):
    """pg_dump could not be run, or produced something unexpected."""


def pg_dump_path() -> Path:
    """The embedded server's pg_dump (the one the committed file is made with)."""
    from . import embedded

    return embedded.bin_dir() / "pg_dump"


def pg_dump_major(pg_dump: Path) -> int:
    """Major version of a pg_dump binary (``pg_dump (PostgreSQL) 18.6`` -> 18)."""
    out = subprocess.run([str(pg_dump), "--version"], check=True, capture_output=True, text=True).stdout
    match = re.search(r"(\d+)(?:\.\d+)?", out)
    if match is None:
        raise SchemaDumpError(f"{pg_dump} --version printed {out.strip()!r}, expected a version number")
    return int(match.group(1))


def tidy(dump: str) -> str:
    """pg_dump's output made deterministic and readable: noise dropped, one-line object headers."""
    text = _NOISE.sub("", dump)
    text = _OBJECT_HEADER.sub(lambda m: f"-- {m.group(2)}: {m.group(1)}\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n")
    if not text.startswith("-- SCHEMA: hrag\n"):
        raise SchemaDumpError(f"the dump does not start with schema {SCHEMA}: {text[:80]!r}")
    return _HEADER + "\n" + text + "\n"


def dump(url: str, *, pg_dump: Path | None = None) -> str:
    """The tidied schema of the database at ``url`` (libpq or SQLAlchemy form), which must be at head."""
    pg_dump = pg_dump or pg_dump_path()
    libpq = url.replace("postgresql+psycopg://", "postgresql://")
    done = subprocess.run(
        [str(pg_dump), "--schema-only", f"--schema={SCHEMA}", "--no-owner", "--dbname", libpq],
        check=False, capture_output=True, text=True,
    )
    if done.returncode != 0:
        raise SchemaDumpError(f"pg_dump of {SCHEMA} failed: {done.stderr.strip()}")
    return tidy(done.stdout)


def dump_fresh(*, pg_dump: Path | None = None) -> str:
    """Start a throwaway embedded server, migrate a scratch database to head, dump it."""
    import psycopg

    from . import embedded, migrate

    base = Path(tempfile.mkdtemp(prefix="hrag-schema-dump-"))
    try:
        server = embedded.start(base)
        with psycopg.connect(server.url(driver=False, database="postgres"), autocommit=True) as conn:
            conn.execute('CREATE DATABASE "hrag_schema_dump"')
        url = server.url(database="hrag_schema_dump")
        migrate.upgrade(url, embedding_dim=schema_sql.DEFAULT_EMBEDDING_DIM)
        return dump(url, pg_dump=pg_dump)
    finally:
        embedded.stop(base)
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hrag_pg.schema_dump", description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="dump this database (already migrated to head) instead of a throwaway one")
    parser.add_argument("--output", type=Path, default=OUTPUT, help=f"file to write (default: {OUTPUT})")
    parser.add_argument("--check", action="store_true", help="do not write; exit 1 if the file is not current")
    args = parser.parse_args(argv)

    pg_dump = pg_dump_path()
    major = pg_dump_major(pg_dump)
    if major != PG_MAJOR:
        print(f"error: {pg_dump} is PostgreSQL {major}; schema.sql is made with pg_dump {PG_MAJOR}", file=sys.stderr)
        return 2
    try:
        text = dump(args.url, pg_dump=pg_dump) if args.url else dump_fresh(pg_dump=pg_dump)
    except (SchemaDumpError, HragError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != text:
            print(f"{args.output} is not current: run `python -m hrag_pg.schema_dump`", file=sys.stderr)
            return 1
        print(f"{args.output} is current")
        return 0
    args.output.write_text(text, encoding="utf-8")
    print(f"{'unchanged' if current == text else 'wrote'} {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
