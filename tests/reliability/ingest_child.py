"""A separate process that ingests a big document and stops half-way through the COPY.

Run as ``python -m tests.reliability.ingest_child URL PATH CHUNK`` from the
repository root.  It writes the document with the HashingEmbedder in COPY
chunks of CHUNK rows; once half the nodes are sent it prints
``HALF <written> <total>`` and sleeps (bounded) inside the
open transaction, still holding the source's advisory lock, so the test can
SIGKILL it there.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import hrag_pg.repository as repository_module
from hrag_pg.api import HRAG
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file
from tests.embedders import HashingEmbedder

#: How long the child waits at HALF for its SIGKILL before giving up on its own.
WAIT_SECONDS = 60.0


def main(url: str, path: str, chunk: int) -> int:
    repository_module.COPY_CHUNK = chunk
    embedder = HashingEmbedder()
    hrag = HRAG(url, embedder=embedder)
    doc = prepare_file(Path(path), IngestOptions(), model_name=embedder.model_name,
                       counter=embedder.token_counter)
    half = len(doc.nodes) // 2

    def after_chunk(written: int) -> None:
        if written >= half:
            print(f"HALF {written} {len(doc.nodes)}", flush=True)
            time.sleep(WAIT_SECONDS)
            raise SystemExit("ingest_child: nobody killed me")

    hrag.repository.write_document(doc, embedder, after_chunk=after_chunk)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
