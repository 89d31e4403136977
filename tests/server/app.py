"""The app a real uvicorn process serves in tests: ``uvicorn tests.server.app:make_app --factory``.

The database comes from ``HRAG_TEST_SERVER_DB``; questions and documents are
embedded by the HashingEmbedder.  A text containing ``slow-embedding`` makes
the embedder touch ``HRAG_TEST_EMBED_MARKER`` (the ingest is under way) and
sleep ``HRAG_TEST_EMBED_DELAY`` seconds: a request a signal can arrive during.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from fastapi import FastAPI

from hrag_pg.api import HRAG, AsyncHRAG
from hrag_pg.server.http import create_app
from tests.embedders import HashingEmbedder

SLOW_WORD = "slow-embedding"


class SlowEmbedder(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(SLOW_WORD in t for t in texts):
            marker = os.environ.get("HRAG_TEST_EMBED_MARKER")
            if marker:
                Path(marker).touch()
            time.sleep(float(os.environ.get("HRAG_TEST_EMBED_DELAY", "0")))
        return super().embed(texts)


def make_app() -> FastAPI:
    url = os.environ["HRAG_TEST_SERVER_DB"]
    return create_app(lambda: AsyncHRAG(HRAG(url, embedder=SlowEmbedder())))
