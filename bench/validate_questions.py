"""Check an evaluation question set against its corpus.

    python bench/validate_questions.py [QUESTIONS.jsonl] [--corpus DIR]

Every evidence snippet must occur verbatim in one corpus file (compared with
whitespace collapsed), be 40-200 characters long and lie inside one
paragraph; a broad question needs 3+ snippets from different paragraphs of
one file.  Prints one line per problem and exits 1 if there is any, else
prints a summary (questions per kind, files used) and exits 0.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hrag_pg.evaluation import Question, load_questions, normalize

HERE = Path(__file__).resolve().parent
DEFAULT_QUESTIONS = HERE / "questions" / "pgdocs.jsonl"
DEFAULT_CORPUS = HERE.parent.parent / "shared" / "corpus" / "pgdocs"
MIN_CHARS, MAX_CHARS, MIN_BROAD = 40, 200, 3



_ITEM_RE = re.compile(r"\n(?=[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t])")


def paragraphs(text: str) -> list[str]:
    """Blocks separated by blank lines, list items apart, whitespace collapsed."""
    return [normalize(part) for block in re.split(r"\n\s*\n", text) for part in _ITEM_RE.split(block)
            if part.strip()]


@dataclass
class Corpus:
    files: dict[str, list[str]]  # name -> paragraphs

    @classmethod
    def load(cls, directory: Path) -> Corpus:
        files = {p.name: paragraphs(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.md"))}
        if not files:
            raise SystemExit(f"{directory}: no Markdown files")
        return cls(files)

    def locate(self, snippet: str) -> list[tuple[str, int]]:
        """(file, paragraph index) of every paragraph containing the snippet."""
        needle = normalize(snippet)
        return [(name, i) for name, paras in self.files.items() for i, p in enumerate(paras) if needle in p]


def evidence_files(questions: list[Question], corpus: Corpus) -> dict[str, set[str]]:
    """Question id -> the corpus files its evidence comes from."""
    return {q.id: {name for s in q.evidence for name, _ in corpus.locate(s)} for q in questions}


def check(questions: list[Question], corpus: Corpus) -> list[str]:
    problems: list[str] = []
    for q in questions:
        located: list[list[tuple[str, int]]] = []
        for snippet in q.evidence:
            size = len(normalize(snippet))
            if not MIN_CHARS <= size <= MAX_CHARS:
                problems.append(f"{q.id}: snippet is {size} characters (allowed {MIN_CHARS}-{MAX_CHARS}): "
                                f"{snippet[:60]!r}")
            hits = corpus.locate(snippet)
            if not hits:
                problems.append(f"{q.id}: snippet not found in any paragraph of the corpus: {snippet[:80]!r}")
            located.append(hits)
        if q.kind == "broad":
            if len(q.evidence) < MIN_BROAD:
                problems.append(f"{q.id}: a broad question needs at least {MIN_BROAD} snippets")
            # some file must hold every snippet, in MIN_BROAD different paragraphs
            files = set.intersection(*({name for name, _ in hits} for hits in located)) if located else set()
            if not any(len({i for hits in located for name, i in hits if name == f}) >= MIN_BROAD
                       for f in files):
                problems.append(f"{q.id}: broad evidence must come from {MIN_BROAD}+ paragraphs of one file")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", nargs="?", type=Path, default=DEFAULT_QUESTIONS)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="directory of Markdown files")
    args = parser.parse_args(argv)
    try:
        questions = load_questions(args.questions)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    corpus = Corpus.load(args.corpus)
    problems = check(questions, corpus)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {args.questions}", file=sys.stderr)
        return 1
    kinds = Counter(q.kind for q in questions)
    files = sorted(set().union(*evidence_files(questions, corpus).values()))
    print(f"ok: {len(questions)} questions ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
          f"{sum(len(q.evidence) for q in questions)} snippets from {len(files)} files: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
