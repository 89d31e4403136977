"""Helpers shared by the benchmark's two environments (standard library only).

``bench/run.py`` runs in the project's environment and ``bench/peers.py`` in
the peers' environment; both import this module, so they read the same
files, apply the same edit and agree on the questions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "pgdocs"
QUESTIONS_DIR = HERE / "questions"
DEFAULT_QUESTIONS = QUESTIONS_DIR / "pgdocs.jsonl"
DATA_DIR = HERE / ".data"  # git-ignored: the embedded server, raw outputs, edited copies
RESULTS_DIR = HERE / "results"
PEERS_PYTHON = HERE / ".peers-venv" / "bin" / "python"

#: Files in the small configuration (evidence files first, then filler).
SMALL_FILES = 40
#: Filler files above this size are skipped in the small configuration.
SMALL_FILLER_MAX_CHARS = 60_000
#: The file whose paragraph the re-ingestion experiment edits.
EDIT_FILE = "012-indexes.md"
EDIT_MARKER = " (This sentence was added by the hrag-pg benchmark.)"


def normalize(text: str) -> str:
    return " ".join(text.split())


def read_questions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def markdown_files(corpus: Path) -> list[Path]:
    files = sorted(p for p in corpus.iterdir() if p.suffix.lower() in (".md", ".markdown") and p.is_file())
    return [p for p in files if p.name.lower() != "readme.md"]


def evidence_files(corpus_files: list[Path], questions: list[dict]) -> list[Path]:
    """The files holding at least one evidence snippet, in corpus order."""
    texts = {p: normalize(p.read_text(encoding="utf-8")) for p in corpus_files}
    snippets = [normalize(s) for q in questions for s in q["evidence"]]
    return [p for p in corpus_files if any(s in texts[p] for s in snippets)]


def select_files(corpus: Path, questions: list[dict], *, small: bool) -> list[Path]:
    """All Markdown files, or for ``small`` the evidence files plus filler up to SMALL_FILES."""
    files = markdown_files(corpus)
    if not small:
        return files
    chosen = evidence_files(files, questions)[:SMALL_FILES]
    for p in files:
        if len(chosen) >= SMALL_FILES:
            break
        if p not in chosen and p.stat().st_size <= SMALL_FILLER_MAX_CHARS:
            chosen.append(p)
    return sorted(chosen)


def answerable(questions: list[dict], files: list[Path]) -> list[dict]:
    """Questions every snippet of which occurs in one of ``files``."""
    texts = [normalize(p.read_text(encoding="utf-8")) for p in files]
    return [q for q in questions if all(any(normalize(s) in t for t in texts) for s in q["evidence"])]


_SHORT_PARAGRAPH = re.compile(r"^[A-Z][^\n`#|>*-]{80,400}\.$")
#: The same prose, wrapped: lines of at most 100 characters, none indented.
_WRAPPED_PARAGRAPH = re.compile(r"^[A-Z][^`#|>*-]{80,400}\.$")


def _wrapped_prose(block: str) -> bool:
    lines = block.splitlines()
    return (len(lines) > 1 and all(0 < len(line) <= 100 and not line[0].isspace() for line in lines)
            and _WRAPPED_PARAGRAPH.match(block) is not None)


def edit_one_paragraph(text: str) -> tuple[str, str]:
    """Append a sentence to one short prose paragraph near the middle of ``text``.

    Returns the edited text and the paragraph as it was.  Fenced code is
    skipped; the chosen paragraph is a single line of 80-400 characters so
    it is one leaf (child) in every system.  A file that wraps its
    paragraphs (the Node.js docs, at 80 columns) has no such line; there the
    paragraph is one of 2+ unindented lines, 80-400 characters in all.
    """
    blocks = text.split("\n\n")
    in_fence = False
    single: list[int] = []
    wrapped: list[int] = []
    for i, block in enumerate(blocks):
        fences = sum(1 for line in block.splitlines() if line.lstrip().startswith(("```", "~~~")))
        if not in_fence and fences == 0:
            if _SHORT_PARAGRAPH.match(block):
                single.append(i)
            elif _wrapped_prose(block):
                wrapped.append(i)
        if fences % 2:
            in_fence = not in_fence
    candidates = single or wrapped
    if not candidates:
        raise ValueError("no short prose paragraph to edit")
    index = candidates[len(candidates) // 2]
    original = blocks[index]
    blocks[index] = original + EDIT_MARKER
    return "\n\n".join(blocks), original


def git_revision() -> str:
    """The checked-out commit, marked dirty when hrag_pg/ or sql/ differ from it.

    Every results file records it in its header (``hrag-pg commit: <sha>``) so
    ``make check-docs`` can tell whether the README's figures describe HEAD.
    """
    import subprocess

    def git(*cmd: str) -> str:
        proc = subprocess.run(["git", *cmd], cwd=REPO, check=False, capture_output=True, text=True)
        return proc.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + (" + uncommitted changes in hrag_pg/ or sql/" if git("status", "--porcelain", "hrag_pg", "sql")
                   else "")


def write_results(out: Path, lines: list[str], *, echo: bool = False) -> None:
    """Write a results file (Markdown, one entry a line) and say where, so a long run's end names its output.

    ``echo`` prints the document too, for the short studies whose table is the answer.
    """
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if echo:
        print("\n".join(lines))
    print(f"wrote {out}")
