"""What a large single-line HTML page costs to ingest, by size: time and peak memory (issue #51).

    python bench/ingest_cost.py [--sizes 0.5,1,2,5] [--model MODEL]

For each size, a page of that many megabytes on one line (paragraphs of
generated English prose, a heading every ten: the shape of a minified page)
is ingested into a fresh benchmark database by a process of its own, which
reports the time to read it into its tree (parse, refine, flatten), the
passages it embeds, the whole ingest's time and the process's peak resident
memory.  A cost per byte that is bounded shows as a constant time per
megabyte and a memory that does not grow with the size.  Writes
``bench/results/ingest-cost.md``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import benchdb
import common

DATABASE = "hrag_bench_ingest_cost"
WORDS = ("the", "rule", "applies", "to", "every", "office", "and", "each", "team", "keeps", "its", "records", "for",
         "seven", "years", "unless", "a", "contract", "says", "otherwise", "while", "server", "stores", "keys",
         "in", "vault", "rotates", "them")


def single_line_page(megabytes: float, seed: int = 1) -> str:
    """An HTML page of about ``megabytes`` MB with no line break."""
    rng = random.Random(seed)
    parts, size, index = ["<html><head><title>Large page</title></head><body>"], 0, 0
    while size < megabytes * 1_000_000:
        index += 1
        sentences = " ".join(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + "." for _ in range(5))
        part = (f"<h2>Section {index // 10 + 1}</h2>" if index % 10 == 1 else "") + f"<p>{sentences}</p>"
        parts.append(part)
        size += len(part)
    return "".join(parts) + "</body></html>"


def child(path: Path, url: str, collection: str, model: str | None) -> dict[str, Any]:
    """Ingest ``path`` in this process: the reading time, passages, the whole time, the peak memory."""
    import resource

    from hrag_pg.api import HRAG
    from hrag_pg.ingest.pipeline import IngestOptions, prepare_file

    hrag = HRAG(url, model=model)
    embedder = hrag.ingest_embedder(collection, lambda: [path.read_text()[:20_000]])
    started = time.perf_counter()
    prepared = prepare_file(path, IngestOptions(), collection=collection, counter=embedder.token_counter)
    read_seconds = time.perf_counter() - started
    started = time.perf_counter()
    report = hrag.ingest([path], collection=collection, stop_on_error=True)
    return {"bytes": path.stat().st_size, "read_seconds": read_seconds, "nodes": report.nodes,
            "embedded": report.embedded, "ingest_seconds": time.perf_counter() - started,
            "targets": len(prepared.search_targets),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "model": hrag.collection_models(collection)[collection].name}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="0.5,1,2,5", help="Page sizes in MB, comma-separated.")
    parser.add_argument("--model", default=None, help="Embedding model (default: hrag's choice for the text).")
    parser.add_argument("--data-dir", type=Path, default=common.DATA_DIR / "pg")
    parser.add_argument("--out", type=Path, default=common.RESULTS_DIR / "ingest-cost.md")
    parser.add_argument("--child", nargs=3, metavar=("PATH", "URL", "COLLECTION"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.child[1], args.child[2], args.model)))
        return 0
    sizes = [float(s) for s in args.sizes.split(",")]
    url = benchdb.fresh_database(args.data_dir, DATABASE)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            page = Path(tmp) / f"page-{size:g}mb.html"
            page.write_text(single_line_page(size), encoding="utf-8")
            command = [sys.executable, __file__, "--child", str(page), url, f"c{len(rows)}"]
            if args.model:
                command += ["--model", args.model]
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  env={**os.environ, "HF_HUB_OFFLINE": "1"})
            if done.returncode != 0:
                raise SystemExit(f"the ingest of {page.name} failed:\n{done.stderr}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(rows[-1], flush=True)
    lines = ["# What a large single-line HTML page costs to ingest", "",
             f"One page per size, its HTML on one line (generated prose, a heading every ten paragraphs), "
             f"ingested by a process of its own into a fresh database with the defaults; model "
             f"{rows[0]['model']}. 'Read' is parsing, refining and flattening the page into its tree; "
             "'ingest' is the whole `HRAG.ingest` (read, embed, write in one transaction); peak memory is "
             "the process's resident maximum, the model included. "
             f"Measured {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, load average "
             f"{os.getloadavg()[0]:.1f} ({os.cpu_count()} cores).",
             f"hrag-pg commit: {common.git_revision()}", "",
             "| page MB | nodes | passages embedded | read s | ingest s | ingest s per MB | peak memory MB |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        megabytes = row["bytes"] / 1_000_000
        lines.append(f"| {megabytes:.1f} | {row['nodes']:,} | {row['embedded']:,} | {row['read_seconds']:.1f} | "
                     f"{row['ingest_seconds']:.0f} | {row['ingest_seconds'] / megabytes:.0f} | "
                     f"{row['peak_mb']:.0f} |")
    common.write_results(args.out, lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
