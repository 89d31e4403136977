"""The budget mode under load: pgbench, 1 and 8 clients, against ``search_leaves`` on the same collection.

    python bench/load.py --database hrag_bench_budget_pgdocs [--seconds 20]

The question set is embedded once and stored in a scratch table of the
benchmark database (dropped afterwards); each pgbench transaction asks one
random question.  Three statements run in turn, each with 1 client and then
8 clients (2 pgbench threads; the machine has 2 cores): the ANN step alone
(``hrag.search_leaves(q, 20)``), the budget mode as it ships
(``hrag.retrieve(q, text, 2000)``) and the budget mode filling its budget
(its costs set to 0 for those sessions).  A run is
bounded by ``--seconds`` and stops by itself.  Writes
``bench/results/load-<database>.md`` with the commit and load average.
"""

from __future__ import annotations

import datetime
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
from pgvector.psycopg import register_vector

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from budget import budget_database

from hrag_pg import embedded_server

TABLE = "public.hrag_bench_load_questions"
STATEMENTS = {
    "search_leaves(k=20)": ("SELECT count(*) FROM hrag.search_leaves("
                            "(SELECT q FROM {t} WHERE i = :i), 20, 'bench');", ""),
    "retrieve(2000), as shipped": ("SELECT count(*) FROM hrag.retrieve((SELECT q FROM {t} WHERE i = :i), "
                                   "(SELECT t FROM {t} WHERE i = :i), 2000, 'bench');", ""),
    "retrieve(2000), filling the budget (costs 0)": (
        "SELECT count(*) FROM hrag.retrieve((SELECT q FROM {t} WHERE i = :i), "
        "(SELECT t FROM {t} WHERE i = :i), 2000, 'bench');",
        "-c hrag.auto_token_cost=0 -c hrag.auto_passage_cost=0 -c hrag.auto_min_tokens=0"),
}


def pgbench(url: str, script: str, clients: int, seconds: int, options: str) -> tuple[float, float]:
    """Latency average (ms) and transactions per second of one bounded pgbench run."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(script)
    env = dict(os.environ, PGOPTIONS=options)
    out = subprocess.run([str(embedded_server.bin_dir() / "pgbench"), "-n", "-f", f.name, "-c", str(clients),
                          "-j", str(min(clients, 2)), "-T", str(seconds), url],
                         capture_output=True, text=True, env=env, check=True, timeout=seconds + 120).stdout
    os.unlink(f.name)
    latency = re.search(r"latency average = ([\d.]+) ms", out)
    tps = re.search(r"tps = ([\d.]+)", out)
    if latency is None or tps is None:
        raise RuntimeError(f"pgbench printed no latency or tps:\n{out}")
    return float(latency.group(1)), float(tps.group(1))


def main() -> int:
    seconds = 20
    if "--seconds" in sys.argv:
        at = sys.argv.index("--seconds")
        seconds = int(sys.argv[at + 1])
        del sys.argv[at:at + 2]
    target = budget_database(__doc__)
    revision = common.git_revision()
    with psycopg.connect(target.url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (i integer PRIMARY KEY, q vector, t text)")
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {TABLE} VALUES (%s, %s, %s)",
                            [(i + 1, v, q["question"])
                             for i, (q, v) in enumerate(zip(target.questions, target.vectors, strict=True))])
    rows = []
    try:
        for name, (body, options) in STATEMENTS.items():
            script = f"\\set i random(1, {len(target.questions)})\n" + body.format(t=TABLE) + "\n"
            pgbench(target.url, script, 1, 3, options)  # warm-up
            single = pgbench(target.url, script, 1, seconds, options)
            loaded = pgbench(target.url, script, 8, seconds, options)
            rows.append((name, single, loaded))
            print(name, single, loaded, flush=True)
    finally:
        with psycopg.connect(target.url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    base_loaded = rows[0][2]
    load = os.getloadavg()[0]
    lines = [f"# Budget mode under load: {target.name}", "",
             f"pgbench, {len(target.questions)} questions at random, {seconds} s per run, 1 client and 8 clients "
             f"(2 threads) over a unix socket. Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} "
             f"UTC, load average {load:.1f} (2 cores).",
             f"hrag-pg commit: {revision}", "",
             "| statement | 1 client: ms | tps | 8 clients: ms | tps | 8-client latency ÷ search_leaves' | "
             "8-client tps ÷ search_leaves' |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, (ms1, tps1), (ms8, tps8) in rows:
        lines.append(f"| {name} | {ms1:.2f} | {tps1:.0f} | {ms8:.2f} | {tps8:.0f} | "
                     f"{ms8 / base_loaded[0]:.2f}× | {tps8 / base_loaded[1]:.2f}× |")
    common.write_results(common.RESULTS_DIR / f"load-{target.name}.md", lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
