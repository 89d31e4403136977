"""Counting tokens without the model's weights gives exactly the model tokenizer's counts.

An unchanged re-ingest decides "unchanged" from content hashes, which include
token counts; the tokenizer-only counter (``tokenizer.json`` read by the
``tokenizers`` library) must therefore count exactly as the loaded model's
tokenizer does, or every document would look changed after the switch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hrag_pg import embedding
from hrag_pg.embedders import sentence_transformers as st_backend
from hrag_pg.ingest.tokens import TokenizerCounter

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]


def test_the_tokenizer_alone_counts_like_the_loaded_model() -> None:
    path = embedding.default_model_path()
    alone = TokenizerCounter(st_backend.load_tokenizer(path))
    loaded = TokenizerCounter(st_backend.load_model(path, None).tokenizer)
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "hrag_pg" / "examples").rglob("*"))
             if p.suffix in {".md", ".txt", ".py", ".html"}]
    texts += [t[i:i + 300] for t in texts for i in range(0, len(t), 300)]
    texts += ["", "  ", "ÄÖ ﬁ 𝔘 \u200b x\ty", "試用期間中の2ヶ月間" * 200, "word " * 5000]
    assert [alone.count(t) for t in texts] == [loaded.count(t) for t in texts]
