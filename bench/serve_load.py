"""``hrag serve`` against its parts: issue #42's targets, on a database ``bench/budget.py`` ingested.

    python bench/serve_load.py [--database hrag_bench_budget_pgdocs] [--seconds 30] [--clients 8]
                               [--limit N] [--out FILE]

Starts a real ``hrag serve`` process on a free loopback port, with
``HRAG_DATABASE_URL`` pointing at the database, waits for ``/health``, then
measures in the same run:

- per question, one after another, each step in its own pass after a warm-up pass
  (not interleaved: the embedding threads of one process would compete with
  the other's while they spin after their work): the embedding alone
  (the collection's model, in this process, as ``HRAG.embed_query`` embeds),
  the SQL alone (the budget mode's statement, ``hrag.retrieve(...)`` at 2,000
  tokens as ``hrag_pg.queries.plan_retrieve`` builds it, with the vector
  computed beforehand, on one psycopg connection over the local socket) and
  the HTTP round trip ``POST /retrieve`` (mode auto, max_tokens 2000) on one
  kept-alive connection.  Target: HTTP p50 <= embedding p50 + SQL p50 + 3 ms;
- ``--clients`` HTTP clients (threads, each its own connection) asking at
  random for ``--seconds``, then as many direct SQL clients (threads, each its
  own psycopg connection, the same statement with precomputed vectors) for as
  long: requests, errors, throughput, p50/p95 latency and the throughput ratio.
  The server embeds every question (CPU) and direct SQL does not;
- a short question's latency while another client asks questions of the longest
  length the server takes (10,000 characters), one after another, against the
  same questions alone: the server cuts a question to what its model reads
  before embedding it, so a long one costs what a 512-token one costs and does
  not hold the others behind it (issue #51).  Target: p50 at most 1.5× alone;
- ``hrag query "<q>" -c <collection> --max-tokens 2000 --json`` as a fresh
  process with ``HRAG_SERVER_URL`` set (median of 5), and once without the
  server for comparison.  Target: <= 0.5 s.

The server is stopped with SIGTERM at the end, whatever happened.  Writes
``bench/results/serve-<database>.md`` (or ``--out``) with the commit and load
average.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchdb
import common

from hrag_pg import db, defaults, queries
from hrag_pg.api import HRAG
from hrag_pg.embedding import embed_queries, identity_of

BUDGET = 2000
TARGET_OVERHEAD_MS = 3.0
TARGET_CLI_S = 0.5
#: The longest question the server takes (hrag_pg.argument_limits.MAX_QUESTION_CHARS).
LONG_QUESTION_CHARS = 10_000
TARGET_BESIDE_LONG = 1.5
CLI_RUNS = 5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(**extra: str) -> dict[str, str]:
    """This environment, with this checkout's hrag_pg first on the path (not another install's)."""
    env = {k: v for k, v in os.environ.items() if k not in ("HRAG_SERVER_URL", "HRAG_DATABASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(common.REPO), os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def hrag_command() -> list[str]:
    script = Path(sys.executable).parent / "hrag"
    return [str(script)] if script.exists() else [sys.executable, "-m", "hrag_pg"]


@contextmanager
def running_server(url: str, log: Path, timeout: float = 120.0) -> Iterator[str]:
    """``hrag serve`` on a free loopback port of ``url``'s database; its base URL.  SIGTERM on the way out."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen([*hrag_command(), "serve", "--port", str(port)], stdout=out,
                                   stderr=subprocess.STDOUT, env=child_env(HRAG_DATABASE_URL=url))
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"hrag serve exited {process.returncode}:\n{log.read_text(errors='replace')}")
            try:
                health = httpx.get(base + "/health", timeout=2)
                if health.status_code == 200 and health.json().get("model_loaded"):
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"hrag serve was not healthy in {timeout:.0f} s:\n{log.read_text(errors='replace')}")
            time.sleep(0.2)
        yield base
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(40)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ask_http(client: httpx.Client, base: str, question: str, collection: str) -> httpx.Response:
    return client.post(base + "/retrieve", json={"question": question, "collection": collection,
                                                 "mode": "auto", "max_tokens": BUDGET})


def budget_statement(question: str, vector: Any, collection: str) -> tuple[str, dict[str, Any]]:
    """The statement the server sends for the budget mode (hrag_pg/retrievers.py: ``plan_retrieve``)."""
    search = queries.Search(query=vector, text=question, collection=collection)
    return queries.plan_retrieve(search, defaults.AUTO_TOP_K, BUDGET)


def sequential(base: str, conn: psycopg.Connection[Any], embedder: Any, questions: list[str],
               vectors: list[Any], collection: str) -> dict[str, list[float]]:
    """Each question's embedding, SQL and HTTP times (ms): each step in its own pass, after a warm-up pass.

    The steps are not interleaved: the embedding libraries' worker threads spin a while after
    their work (OpenMP), and this process's would then compete with the server's for the cores.
    """
    def embedding(question: str, vector: Any) -> None:
        embed_queries(embedder, [question])

    def sql(question: str, vector: Any) -> None:
        conn.execute(*budget_statement(question, vector, collection)).fetchall()

    def http(question: str, vector: Any) -> None:
        response = ask_http(client, base, question, collection)
        if response.status_code != 200:
            raise RuntimeError(f"POST /retrieve answered {response.status_code}: {response.text[:300]}")

    times: dict[str, list[float]] = {}
    with httpx.Client(timeout=60) as client:
        for name, step in (("embedding", embedding), ("sql", sql), ("http", http)):
            time.sleep(1.0)  # (the previous step's spinning threads go idle)
            for warm in (True, False):
                measured = []
                for question, vector in zip(questions, vectors, strict=True):
                    started = time.perf_counter()
                    step(question, vector)
                    measured.append((time.perf_counter() - started) * 1000)
                if not warm:
                    times[name] = measured
    return times


def concurrent(clients: int, seconds: float, open_client: Callable[[], Any],
               ask: Callable[[Any, int], bool], count: int) -> dict[str, Any]:
    """``clients`` threads asking random questions until ``seconds`` have passed; requests, errors, latencies."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors = [0] * clients
    barrier = threading.Barrier(clients + 1)
    stop = [0.0]

    def work(n: int) -> None:
        rng = random.Random(n)
        with open_client() as handle:
            barrier.wait()
            while time.perf_counter() < stop[0]:
                started = time.perf_counter()
                try:
                    ok = ask(handle, rng.randrange(count))
                except Exception:  # noqa: BLE001 (an error is counted, the client goes on)
                    ok = False
                latencies[n].append((time.perf_counter() - started) * 1000)
                if not ok:
                    errors[n] += 1

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(clients)]
    for t in threads:
        t.start()
    stop[0] = time.perf_counter() + seconds + 3600  # (until every client is connected)
    barrier.wait()
    began = time.perf_counter()
    stop[0] = began + seconds
    for t in threads:
        t.join(seconds + 120)
    elapsed = time.perf_counter() - began
    flat = [v for per in latencies for v in per]
    return {"requests": len(flat), "errors": sum(errors), "rps": len(flat) / elapsed,
            "p50": percentile(flat, 0.5) if flat else float("nan"),
            "p95": percentile(flat, 0.95) if flat else float("nan")}


def beside_long(base: str, questions: list[str], collection: str, seconds: float) -> dict[str, Any]:
    """Short questions one after another on one connection, first alone and then while a second client asks
    10,000-character questions without a pause; the short ones' latencies (ms) and the long ones' count."""
    longest = (" ".join(questions) + " ") * (LONG_QUESTION_CHARS // max(1, len(" ".join(questions))) + 1)
    long_question = longest[:LONG_QUESTION_CHARS]

    def shorts(client: httpx.Client) -> list[float]:
        measured: list[float] = []
        until = time.perf_counter() + seconds
        while time.perf_counter() < until:
            question = questions[len(measured) % len(questions)]
            started = time.perf_counter()
            response = ask_http(client, base, question, collection)
            if response.status_code != 200:
                raise RuntimeError(f"POST /retrieve answered {response.status_code}: {response.text[:300]}")
            measured.append((time.perf_counter() - started) * 1000)
        return measured

    stop = threading.Event()
    long_ms: list[float] = []

    def ask_long() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.is_set():
                started = time.perf_counter()
                response = ask_http(client, base, long_question, collection)
                if response.status_code != 200:
                    raise RuntimeError(f"the long question: {response.status_code}: {response.text[:300]}")
                long_ms.append((time.perf_counter() - started) * 1000)

    with httpx.Client(timeout=120) as client:
        shorts(client)  # (warm-up)
        alone = shorts(client)
        asker = threading.Thread(target=ask_long, daemon=True)
        asker.start()
        while not long_ms and asker.is_alive():  # (the long questions are under way)
            time.sleep(0.05)
        beside = shorts(client)
        stop.set()
        asker.join(180)
    return {"alone": alone, "beside": beside, "long": long_ms}


def cli_seconds(question: str, collection: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run([*hrag_command(), "query", question, "-c", collection, "--max-tokens", str(BUDGET),
                           "--json"], check=False, capture_output=True, text=True, env=env, timeout=300)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"hrag query exited {done.returncode}: {done.stderr.strip()}")
    return elapsed


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", default="hrag_bench_budget_pgdocs")
    parser.add_argument("--questions", type=Path, default=common.DEFAULT_QUESTIONS)
    parser.add_argument("--collection", default="bench")
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    parser.add_argument("--seconds", type=float, default=30.0, help="Length of each concurrent run (default 30).")
    parser.add_argument("--clients", type=int, default=8, help="Concurrent clients (default 8).")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N questions (a quick trial).")
    parser.add_argument("--out", type=Path, default=None,
                        help="Results file (default bench/results/serve-<database>.md).")
    args = parser.parse_args()
    if args.seconds <= 0 or args.clients < 1 or (args.limit is not None and args.limit < 1):
        parser.error("--seconds, --clients and --limit must be positive")
    admin = benchdb.maintenance_url(args.data_dir)
    with psycopg.connect(admin) as conn:  # before the model loads: a wrong name fails at once
        names = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'hrag_bench%'")]
    if args.database not in names:
        parser.error(f"no database {args.database!r} on {admin}; the benchmark's: {', '.join(sorted(names)) or 'none'}")
    args.url = benchdb.with_database(admin, args.database)
    return args


def main() -> int:
    args = parse_args()
    url, collection = args.url, args.collection
    questions = [q["question"] for q in common.read_questions(args.questions)][:args.limit]
    revision = common.git_revision()
    hrag = HRAG(db.sqlalchemy_url(url))
    embedder = hrag.query_embedder(collection)  # the collection's recorded model, as the server embeds with
    model = identity_of(embedder).name
    vectors = list(embed_queries(embedder, questions))
    log = Path(args.out or common.DATA_DIR / "serve_load.log").with_suffix(".server.log")
    log.parent.mkdir(parents=True, exist_ok=True)

    def sql_client() -> psycopg.Connection[Any]:
        conn = psycopg.connect(url, row_factory=dict_row, autocommit=True)
        register_vector(conn)
        return conn

    with running_server(url, log) as base:
        print(f"hrag serve at {base}; {len(questions)} questions, model {model}", flush=True)
        with sql_client() as conn:
            seq = sequential(base, conn, embedder, questions, vectors, collection)
        print("sequential done", flush=True)

        def ask_http_ok(client: httpx.Client, i: int) -> bool:
            return ask_http(client, base, questions[i], collection).status_code == 200

        def ask_sql_ok(conn: psycopg.Connection[Any], i: int) -> bool:
            sql, params = budget_statement(questions[i], vectors[i], collection)
            conn.execute(sql, params).fetchall()
            return True

        loaded_http = concurrent(args.clients, args.seconds, lambda: httpx.Client(timeout=60), ask_http_ok,
                                 len(questions))
        print("concurrent HTTP", loaded_http, flush=True)
        loaded_sql = concurrent(args.clients, args.seconds, sql_client, ask_sql_ok, len(questions))
        print("concurrent SQL", loaded_sql, flush=True)
        long = beside_long(base, questions, collection, args.seconds)
        print("beside a long question", {k: len(v) for k, v in long.items()}, flush=True)

        served = child_env(HRAG_SERVER_URL=base)
        cli = [cli_seconds(questions[i % len(questions)], collection, served) for i in range(CLI_RUNS)]
    direct = cli_seconds(questions[0], collection, child_env(HRAG_DATABASE_URL=url))
    hrag.close()

    p50 = {name: statistics.median(values) for name, values in seq.items()}
    p95 = {name: percentile(values, 0.95) for name, values in seq.items()}
    overhead = p50["http"] - p50["embedding"] - p50["sql"]
    cli_median = statistics.median(cli)

    def met(ok: bool) -> str:
        return "**met**" if ok else "**not met**"

    lines = [f"# hrag serve against its parts: {args.database}", "",
             f"{len(questions)} questions of `{args.questions.name}`, collection `{collection}` (model {model}), "
             f"budget mode at {BUDGET:,} tokens; `hrag serve` on loopback, the database over a unix socket. "
             f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
             f"{os.getloadavg()[0]:.1f} ({os.cpu_count()} cores; server, clients and PostgreSQL share them).",
             f"hrag-pg commit: {revision}", "",
             "## One question at a time", "",
             "Each question, in three passes (each after a warm-up pass, one step at a time so that no two "
             "processes' embedding threads compete): its embedding alone (in this process, the collection's model), "
             "the budget mode's statement alone (vector computed beforehand, one psycopg connection) and "
             "`POST /retrieve` (mode auto, max_tokens 2000) on a kept-alive connection, which embeds and queries.", "",
             "| step | p50 ms | p95 ms |", "|---|---:|---:|",
             f"| embedding | {p50['embedding']:.2f} | {p95['embedding']:.2f} |",
             f"| SQL (`hrag.retrieve`, 2,000 tokens) | {p50['sql']:.2f} | {p95['sql']:.2f} |",
             f"| HTTP `POST /retrieve` | {p50['http']:.2f} | {p95['http']:.2f} |", "",
             f"Target HTTP p50 ≤ embedding p50 + SQL p50 + {TARGET_OVERHEAD_MS:.0f} ms: "
             f"{met(overhead <= TARGET_OVERHEAD_MS)} (the server's overhead: {overhead:+.2f} ms).", "",
             f"## {args.clients} concurrent clients, {args.seconds:g} s each", "",
             f"{args.clients} threads, each with its own connection, asking random questions until the time is up: "
             "first through the server, then the same statement directly in SQL. The server embeds every question "
             "(CPU, on the same cores) and direct SQL does not, so the ratio is the cost of the whole answer, "
             "not of the HTTP layer alone; the client threads also take CPU from the server.", "",
             "| path | requests | errors | req/s | p50 ms | p95 ms |", "|---|---:|---:|---:|---:|---:|"]
    for name, r in (("HTTP `POST /retrieve`", loaded_http), ("direct SQL", loaded_sql)):
        lines.append(f"| {name} | {r['requests']} | {r['errors']} | {r['rps']:.1f} | {r['p50']:.2f} | "
                     f"{r['p95']:.2f} |")
    ratio = loaded_http["rps"] / loaded_sql["rps"] if loaded_sql["rps"] else float("nan")
    alone_p50, beside_p50 = statistics.median(long["alone"]), statistics.median(long["beside"])
    slowdown = beside_p50 / alone_p50
    lines += ["", f"Throughput through the server ÷ direct SQL: {ratio:.2f}×.", "",
              f"## A short question while a {LONG_QUESTION_CHARS:,}-character one runs", "",
              f"The questions above one after another on one connection for {args.seconds:g} s, alone, then "
              f"while a second client asks a {LONG_QUESTION_CHARS:,}-character question (the longest the server "
              "takes) again and again without a pause.", "",
              "| | short questions | p50 ms | p95 ms |", "|---|---:|---:|---:|",
              f"| alone | {len(long['alone'])} | {alone_p50:.1f} | {percentile(long['alone'], 0.95):.1f} |",
              f"| beside the long questions | {len(long['beside'])} | {beside_p50:.1f} | "
              f"{percentile(long['beside'], 0.95):.1f} |",
              f"| the long questions themselves | {len(long['long'])} | {statistics.median(long['long']):.1f} | "
              f"{percentile(long['long'], 0.95):.1f} |", "",
              f"Short p50 beside the long ones ÷ alone: {slowdown:.2f}×. Target ≤ {TARGET_BESIDE_LONG}×: "
              f"{met(slowdown <= TARGET_BESIDE_LONG)}.", "",
              "## `hrag query` through the server", "",
              f"`hrag query \"<q>\" -c {collection} --max-tokens {BUDGET} --json` as a fresh process, "
              "wall time.", "",
              "| how | seconds |", "|---|---:|",
              f"| `HRAG_SERVER_URL` set, median of {CLI_RUNS} | {cli_median:.2f} |",
              f"| without a server (opens the database, loads the model), 1 run | {direct:.2f} |", "",
              f"Target ≤ {TARGET_CLI_S} s through the server: {met(cli_median <= TARGET_CLI_S)}."]
    out = args.out or common.RESULTS_DIR / f"serve-{args.database}.md"
    common.write_results(out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
