"""A bounded soak of ``hrag serve``: readers, a writer and a reembed at once, then PostgreSQL restarted under them.

    python bench/soak.py [--requests 3000] [--http-readers 6] [--mcp-readers 2] [--out FILE]

On its own embedded PostgreSQL (``bench/.data/soak-pg``, stopped and started
by the run, so nothing else is disturbed), the five English regulations of
``bench/corpora/regulations-en`` are ingested into collection ``soak`` with
all-MiniLM-L6-v2, and a real ``hrag serve`` is started on a free loopback
port with a write token.  Then, for a fixed number of answered-or-refused
requests:

- readers ask the corpus's narrow questions over and over: ``--http-readers``
  threads through ``POST /retrieve`` and ``--mcp-readers`` through the MCP
  ``retrieve`` tool over streamable HTTP (the SDK's client), budget mode at
  2,000 tokens;
- one writer re-ingests a document of the same collection through
  ``POST /documents``, alternating two versions, every ``--write-every`` s;
- after a quarter of the requests ``hrag reembed -c soak --model
  multilingual-e5-small-q4`` runs as its own process (the switch of the whole
  collection to another model while all of the above goes on);
- once it has finished and half of the requests are done, PostgreSQL is
  stopped, left down ``--down`` s and started again.

Counted: requests answered; errors, each checked to be a JSON ``{"error":
...}`` (an MCP tool error for MCP) and never a 500 or a trace; answers that
mixed models; documents lost; the time from PostgreSQL's start to the first
answer again.  An answer mixed models when it is none of the four answers
the question has in a quiet moment (each model, each version of the
writer's document), measured before the load (old model) and after it (new
model, with the server's remembered model record expired): a question
embedded by one model and searched among the other's vectors ranks other
passages.  A document is lost when it is missing, when its tree fails
``hrag.check_integrity()``, or when the writer's document is not the last
version the server acknowledged.

Writes ``bench/results/soak.md`` (or ``--out``) with the commit and load
average.  Loopback only; the run stops by itself (``--max-seconds``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchdb
import common
from serve_load import child_env, hrag_command, running_server

from hrag_pg import db, embedded_server
from hrag_pg.api import HRAG
from hrag_pg.embedding import E5_Q4, MINILM

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpora" / "regulations-en"
QUESTIONS = HERE / "questions" / "regulations-en.jsonl"
COLLECTION = "soak"
WRITER_SOURCE = "soak-release-notes.md"
TOKEN = "soak-write-token"
BUDGET = 2000
#: How long the server remembers a collection's model record (hrag_pg.api.MODEL_RECORD_SECONDS), and a margin.
RECORD_EXPIRY = 6.0
NODE_ID = re.compile(r"\| node ([0-9a-f-]{36})")


def writer_version(n: int) -> str:
    """The writer's document: release notes of a build tool, nothing the regulations' questions ask about."""
    return (f"# Release notes\n\n## Version {n}\n\nThe build tool now caches compiled shaders between runs "
            f"(revision {n}).\n\n## Known problems\n\nThe progress bar flickers on very wide terminals.\n")


@dataclass
class Tally:
    """What the readers, the writer and the restart saw (threads append under the lock)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    answers: list[tuple[float, str, int, frozenset[str]]] = field(default_factory=list)
    errors: list[tuple[float, str, str]] = field(default_factory=list)
    bad_errors: list[tuple[float, str, str]] = field(default_factory=list)
    writes: list[tuple[float, int, bool]] = field(default_factory=list)
    acknowledged: int | None = None

    def requests(self) -> int:
        """The readers' requests so far (the writer's are counted apart, in ``writes``)."""
        with self.lock:
            return len(self.answers) + sum(1 for e in (*self.errors, *self.bad_errors) if e[1] != "write")


def http_answer(client: httpx.Client, base: str, question: str) -> httpx.Response:
    return client.post(base + "/retrieve", json={"question": question, "collection": COLLECTION,
                                                 "mode": "auto", "max_tokens": BUDGET}, timeout=120)


def answer_key(payload: dict[str, Any]) -> frozenset[str]:
    return frozenset(r["node_id"] for r in payload["results"])


def classify_http(response: httpx.Response) -> tuple[str, str]:
    """("ok", "") for an answer, ("error", message) for a clear JSON error, ("bad", why) otherwise."""
    if response.status_code == 200:
        return "ok", ""
    text = response.text
    try:
        body = response.json()
    except ValueError:
        return "bad", f"{response.status_code} not JSON: {text[:200]}"
    if (response.status_code >= 500 and response.status_code != 503) or "Traceback" in text:
        return "bad", f"{response.status_code}: {text[:200]}"
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return "bad", f"{response.status_code} without an error message: {text[:200]}"
    return "error", f"{response.status_code}: {body['error']}"


def http_reader(base: str, questions: list[str], offset: int, tally: Tally, stop: threading.Event) -> None:
    with httpx.Client() as client:
        i = offset
        while not stop.is_set():
            question = questions[i % len(questions)]
            i += 1
            try:
                response = http_answer(client, base, question)
            except httpx.TransportError as exc:
                with tally.lock:
                    tally.bad_errors.append((time.monotonic(), "http", f"transport: {exc}"))
                continue
            kind, message = classify_http(response)
            with tally.lock:
                if kind == "ok":
                    tally.answers.append((time.monotonic(), question, 0, answer_key(response.json())))
                elif kind == "error":
                    tally.errors.append((time.monotonic(), "http", message))
                else:
                    tally.bad_errors.append((time.monotonic(), "http", message))


async def _mcp_loop(base: str, questions: list[str], offset: int, tally: Tally, stop: threading.Event) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with streamable_http_client(base + "/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        i = offset
        while not stop.is_set():
            question = questions[i % len(questions)]
            i += 1
            result = await session.call_tool("retrieve", {"question": question, "collection": COLLECTION,
                                                          "max_tokens": BUDGET})
            text = "\n".join(block.text for block in result.content if block.type == "text")
            with tally.lock:
                if not result.is_error:
                    tally.answers.append((time.monotonic(), question, 1, frozenset(NODE_ID.findall(text))))
                elif "Traceback" in text or not text.strip():
                    tally.bad_errors.append((time.monotonic(), "mcp", text[:200]))
                else:
                    tally.errors.append((time.monotonic(), "mcp", " ".join(text.split())[:200]))


def mcp_reader(base: str, questions: list[str], offset: int, tally: Tally, stop: threading.Event) -> None:
    try:
        asyncio.run(_mcp_loop(base, questions, offset, tally, stop))
    except Exception as exc:  # noqa: BLE001 - a reader that died is a failure of the run, counted
        with tally.lock:
            tally.bad_errors.append((time.monotonic(), "mcp", f"the MCP session ended: {type(exc).__name__}: {exc}"))


def write(client: httpx.Client, base: str, version: int) -> httpx.Response:
    return client.post(base + "/documents", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120,
                       json={"text": writer_version(version), "source": WRITER_SOURCE, "collection": COLLECTION})


def writer(base: str, every: float, tally: Tally, stop: threading.Event) -> None:
    with httpx.Client() as client:
        version = 1
        while not stop.wait(every):
            version = 2 if version == 1 else 1
            try:
                response = write(client, base, version)
            except httpx.TransportError as exc:
                with tally.lock:
                    tally.bad_errors.append((time.monotonic(), "write", f"transport: {exc}"))
                continue
            kind, message = classify_http(response)
            with tally.lock:
                tally.writes.append((time.monotonic(), version, kind == "ok"))
                if kind == "ok":
                    tally.acknowledged = version
                elif kind == "error":
                    tally.errors.append((time.monotonic(), "write", message))
                else:
                    tally.bad_errors.append((time.monotonic(), "write", message))


def quiet_answers(base: str, questions: list[str]) -> dict[str, set[frozenset[str]]]:
    """Each question's answer with each version of the writer's document, nothing else running."""
    found: dict[str, set[frozenset[str]]] = {q: set() for q in questions}
    with httpx.Client() as client:
        for version in (1, 2):
            response = write(client, base, version)
            response.raise_for_status()
            for question in questions:
                answer = http_answer(client, base, question)
                answer.raise_for_status()
                found[question].add(answer_key(answer.json()))
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="reader requests in all (answered or refused)")
    parser.add_argument("--documents", type=int, default=None, help="only the first N regulations (the test's soak)")
    parser.add_argument("--http-readers", type=int, default=6)
    parser.add_argument("--mcp-readers", type=int, default=2)
    parser.add_argument("--write-every", type=float, default=0.5, help="seconds between the writer's re-ingests")
    parser.add_argument("--down", type=float, default=3.0, help="seconds PostgreSQL stays stopped")
    parser.add_argument("--max-seconds", type=float, default=1800, help="stop the load after this long anyway")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data" / "soak-pg")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "soak.md")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every count is as promised (no mixed answer, nothing lost, every error clear)."""
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    questions = [q["question"] for q in common.read_questions(QUESTIONS) if q["kind"] == "narrow"][:10]
    url = benchdb.fresh_database(args.data_dir, "hrag_soak")
    print(f"ingesting {CORPUS.name} with {MINILM} ...", flush=True)
    files = sorted(CORPUS.glob("*.md"))[:args.documents]
    HRAG(url, model=MINILM).ingest(files, collection=COLLECTION)
    sources = {p.name for p in files} | {WRITER_SOURCE}
    os.environ["HRAG_SERVER_TOKEN"] = TOKEN
    tally = Tally()
    stop = threading.Event()
    started = time.monotonic()
    events: dict[str, float] = {}
    logs = args.data_dir.parent  # (beside the run's PostgreSQL, not among the results)
    with running_server(url, logs / f"{args.data_dir.name}.server.log") as base:
        before = quiet_answers(base, questions)
        print(f"server at {base}; the old model's answers taken; load starts", flush=True)
        threads = [threading.Thread(target=http_reader, args=(base, questions, i, tally, stop))
                   for i in range(args.http_readers)]
        threads += [threading.Thread(target=mcp_reader, args=(base, questions, 100 + i, tally, stop))
                    for i in range(args.mcp_readers)]
        threads.append(threading.Thread(target=writer, args=(base, args.write_every, tally, stop)))
        for thread in threads:
            thread.start()
        reembed: subprocess.Popen[bytes] | None = None
        reembed_log = logs / f"{args.data_dir.name}.reembed.log"
        restarted = False
        load_started = time.monotonic()
        # (the load goes on past --requests until PostgreSQL was restarted, which waits for the reembed)
        while ((tally.requests() < args.requests or not restarted)
               and time.monotonic() - load_started < args.max_seconds):
            done = tally.requests()
            if reembed is None and done >= args.requests // 4:
                print(f"{done} requests: hrag reembed starts", flush=True)
                events["reembed started"] = time.monotonic()
                with reembed_log.open("wb") as log:
                    reembed = subprocess.Popen([*hrag_command(), "reembed", "-c", COLLECTION, "--model", E5_Q4],
                                               stdout=log, stderr=subprocess.STDOUT,
                                               env=child_env(HRAG_DATABASE_URL=url))
            if reembed is not None and reembed.poll() is not None and "reembed ended" not in events:
                events["reembed ended"] = time.monotonic()
                print(f"{tally.requests()} requests: hrag reembed exited {reembed.returncode}", flush=True)
            if not restarted and "reembed ended" in events and done >= args.requests // 2:
                print(f"{done} requests: PostgreSQL stops", flush=True)
                events["postgres stopping"] = time.monotonic()
                embedded_server.stop(args.data_dir)
                events["postgres stopped"] = time.monotonic()
                time.sleep(args.down)
                embedded_server.start(args.data_dir)
                events["postgres started"] = time.monotonic()
                restarted = True
                print(f"{tally.requests()} requests: PostgreSQL started again", flush=True)
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(180)
        if reembed is not None and reembed.poll() is None:
            reembed.wait(600)
        load_seconds = time.monotonic() - load_started
        # What is stored now, before the quiet answers write the writer's document again.
        stored = stored_state(url)
        time.sleep(RECORD_EXPIRY)
        after = quiet_answers(base, questions)
    return report(args, tally, events, before, after, stored, sources, reembed, reembed_log, load_seconds,
                  time.monotonic() - started, url)


def stored_state(url: str) -> dict[str, Any]:
    with psycopg.connect(db.libpq_url(url)) as conn:
        documents = {r[0]: r[1] for r in conn.execute(
            "SELECT d.source, hrag.node_text(n.id) FROM hrag.documents d JOIN hrag.nodes n "
            "ON n.document_id = d.id AND n.parent_id IS NULL WHERE d.collection = %s", (COLLECTION,))}
        problems = conn.execute("SELECT count(*) FROM hrag.check_integrity()").fetchone()
        model = conn.execute("SELECT model FROM hrag.collection_models WHERE collection = %s",
                             (COLLECTION,)).fetchone()
    return {"documents": documents, "integrity problems": problems[0] if problems else None,
            "model": model[0] if model else None}


def report(args: argparse.Namespace, tally: Tally, events: dict[str, float], before: dict[str, set[frozenset[str]]],
           after: dict[str, set[frozenset[str]]], stored: dict[str, Any], sources: set[str],
           reembed: subprocess.Popen[bytes] | None, reembed_log: Path, load_seconds: float, total_seconds: float,
           url: str) -> int:
    kinds: Counter[str] = Counter()
    mixed: list[tuple[float, str, int]] = []
    for at, question, channel, key in tally.answers:
        if key in before[question]:
            kinds["old"] += 1
        elif key in after[question]:
            kinds["new"] += 1
        else:
            kinds["mixed"] += 1
            mixed.append((at, question, channel))
    switched = events.get("reembed ended")
    first_ok_after = None
    if "postgres started" in events:
        first_ok_after = min((a[0] for a in tally.answers if a[0] >= events["postgres started"]), default=None)
    recovery = first_ok_after - events["postgres started"] if first_ok_after is not None else None
    writer_text = stored["documents"].get(WRITER_SOURCE, "")
    lost = sorted(sources - set(stored["documents"]))
    if tally.acknowledged is not None and f"(revision {tally.acknowledged})" not in writer_text:
        lost.append(f"{WRITER_SOURCE} (not the last acknowledged version {tally.acknowledged})")
    if stored["integrity problems"]:
        lost.append(f"{stored['integrity problems']} integrity problems")
    # (the messages name the run's own PostgreSQL; the results file must not name this machine's paths)
    here = str(args.data_dir.resolve())

    def portable(message: str) -> str:
        return message.replace(here, "<data dir>")

    error_kinds = Counter(re.sub(r"[0-9a-f-]{36}|\d+(\.\d+)?", "N", portable(m))[:140] for _, _, m in tally.errors)
    bad_kinds = Counter(portable(m)[:160] for _, _, m in tally.bad_errors)
    mixed_after_switch = [round(at - switched, 2) for at, _, _ in mixed] if switched else []

    def reader(entries: list[tuple[float, str, str]]) -> int:
        return sum(1 for e in entries if e[1] != "write")

    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Soak: hrag serve with readers, a writer and a reembed at once, then PostgreSQL restarted",
        "",
        f"`python bench/soak.py --requests {args.requests} --http-readers {args.http_readers} "
        + (f"--documents {args.documents} " if args.documents else "")
        + f"--mcp-readers {args.mcp_readers} --write-every {args.write_every} --down {args.down}` "
        f"on its own embedded PostgreSQL; {len(sources) - 1} English regulations "
        f"(`bench/corpora/regulations-en`) in collection `{COLLECTION}`, {MINILM} switched to {E5_Q4} by "
        "`hrag reembed` during the load; narrow questions, budget mode at 2,000 tokens.",
        f"Measured {now}, load average {os.getloadavg()[0]:.1f} (2 cores).",
        f"hrag-pg commit: {common.git_revision()}",
        "",
        "| count | value |",
        "|---|---:|",
        f"| reader requests (HTTP and MCP) | {tally.requests():,} in {load_seconds:.0f} s |",
        f"| answered | {len(tally.answers):,} |",
        f"| refused with a clear error (JSON error; an MCP tool error) | {reader(tally.errors):,} |",
        f"| errors that were not clear (a 500, a trace, not JSON, a dead session) | {reader(tally.bad_errors):,} |",
        f"| answers with the old model's contexts | {kinds['old']:,} |",
        f"| answers with the new model's contexts | {kinds['new']:,} |",
        f"| answers that mixed models (neither model's answer) | {kinds['mixed']:,} |",
        f"| writer's re-ingests acknowledged / refused clearly / not clearly | {sum(w[2] for w in tally.writes):,} / "
        f"{len(tally.errors) - reader(tally.errors):,} / {len(tally.bad_errors) - reader(tally.bad_errors):,} |",
        f"| `hrag reembed` | exit {reembed.returncode if reembed else 'not started'}, "
        f"{(events['reembed ended'] - events['reembed started']):.1f} s |" if switched else
        "| `hrag reembed` | did not end during the load |",
        f"| documents lost | {len(lost)} |",
        "| PostgreSQL down (stop to start) | "
        + (f"{events['postgres started'] - events['postgres stopping']:.1f} s |" if "postgres started" in events
           else "not restarted |"),
        "| first answer after PostgreSQL started | " + (f"{recovery:.2f} s |" if recovery is not None else "none |"),
        f"| collection's model at the end | {stored['model']} |",
        "",
    ]
    if mixed:
        lines += ["Mixed answers, seconds after `hrag reembed` exited (negative: before): "
                  + ", ".join(f"{s:+.2f}" for s in sorted(mixed_after_switch)[:40]), ""]
    if lost:
        lines += ["Lost: " + "; ".join(lost), ""]
    if error_kinds:
        lines += ["Clear errors, by message:", ""] + [f"- {n} × {m}" for m, n in error_kinds.most_common(12)] + [""]
    if bad_kinds:
        lines += ["Errors that were not clear:", ""] + [f"- {n} × {m}" for m, n in bad_kinds.most_common(12)] + [""]
    tail = reembed_log.read_text(errors="replace").strip()[-300:] if reembed_log.exists() else ""
    lines += [f"Whole run {total_seconds:.0f} s. The end of `hrag reembed`'s output: {tail!r}"]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    ok = (not mixed and not lost and not tally.bad_errors and recovery is not None
          and reembed is not None and reembed.returncode == 0 and stored["model"] == E5_Q4)
    print(f"\nwritten: {args.out}; {'every count as promised' if ok else 'NOT as promised'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
