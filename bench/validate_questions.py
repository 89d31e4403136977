"""Check an evaluation question set against its corpus.

    python bench/validate_questions.py [QUESTIONS.jsonl] [--corpus DIR]
    python bench/validate_questions.py --corpus DIR --questions FILE [--sections]

Every evidence snippet must occur verbatim in one corpus file (compared with
whitespace collapsed), be 40-200 characters long and lie inside one
paragraph; a broad question needs 3+ snippets from different paragraphs of
one file, all under one heading below the file's title (its *section*; a file
without subheadings is one section).  Prints one line per problem and exits 1
if there is any, else prints a summary (questions per kind, files used) and
exits 0; ``--sections`` also prints the section each broad question's
evidence lies in.  A question that names its gold section (``"source"``: the
file, ``"section"``: the heading, as the regulations' sets do) must have every
snippet inside that section of that file: between its heading line and the
next heading of the same or a higher level.  ``--min-chars`` lowers the
minimum for sets whose items are short (a Japanese rule book's items often
hold 20-40 characters).
"""

from __future__ import annotations

import argparse
import json
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
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(```|~~~)")


def paragraphs(text: str) -> list[str]:
    """Blocks separated by blank lines, list items apart, whitespace collapsed."""
    return [para for para, _ in sectioned_paragraphs(text)]


def sectioned_paragraphs(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """(paragraph, heading path above it) for every paragraph of ``paragraphs``.

    A block that is one ATX heading line outside fenced code opens a section;
    the path holds the headings from the file's title down to it.
    """
    out: list[tuple[str, tuple[str, ...]]] = []
    path: list[tuple[int, str]] = []
    in_fence = False
    for block in re.split(r"\n\s*\n", text):
        heading = _HEADING_RE.match(block.strip("\n")) if not in_fence and "\n" not in block.strip("\n") else None
        if heading:
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, heading.group(2))]
        section = tuple(title for _, title in path)
        out.extend((normalize(part), section) for part in _ITEM_RE.split(block) if part.strip())
        if sum(1 for line in block.splitlines() if _FENCE_RE.match(line)) % 2:
            in_fence = not in_fence
    return out


@dataclass
class Corpus:
    files: dict[str, list[str]]  # name -> paragraphs
    sections: dict[str, list[tuple[str, ...]]]  # name -> heading path of each paragraph

    @classmethod
    def load(cls, directory: Path) -> Corpus:
        parsed = {p.name: sectioned_paragraphs(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.md"))}
        if not parsed:
            raise SystemExit(f"{directory}: no Markdown files")
        return cls({name: [para for para, _ in items] for name, items in parsed.items()},
                   {name: [section for _, section in items] for name, items in parsed.items()})

    def common_section(self, name: str, indexes: set[int]) -> tuple[str, ...]:
        """The deepest heading path shared by the given paragraphs of file ``name``."""
        paths = [self.sections[name][i] for i in sorted(indexes)]
        common: list[str] = []
        for titles in zip(*paths, strict=False):  # the common prefix of paths of any lengths
            if len(set(titles)) != 1:
                break
            common.append(titles[0])
        return tuple(common)

    def has_subsections(self, name: str) -> bool:
        return any(len(path) > 1 for path in self.sections[name])

    def locate(self, snippet: str) -> list[tuple[str, int]]:
        """(file, paragraph index) of every paragraph containing the snippet."""
        needle = normalize(snippet)
        return [(name, i) for name, paras in self.files.items() for i, p in enumerate(paras) if needle in p]


def evidence_files(questions: list[Question], corpus: Corpus) -> dict[str, set[str]]:
    """Question id -> the corpus files its evidence comes from."""
    return {q.id: {name for s in q.evidence for name, _ in corpus.locate(s)} for q in questions}


def check(questions: list[Question], corpus: Corpus, *, min_chars: int = MIN_CHARS) -> list[str]:
    problems: list[str] = []
    for q in questions:
        located: list[list[tuple[str, int]]] = []
        for snippet in q.evidence:
            size = len(normalize(snippet))
            if not min_chars <= size <= MAX_CHARS:
                problems.append(f"{q.id}: snippet is {size} characters (allowed {min_chars}-{MAX_CHARS}): "
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
            elif not broad_sections(q, corpus):
                problems.append(f"{q.id}: broad evidence spans the whole of its file, not one section "
                                f"(snippets under different top-level headings)")
    return problems


def section_problems(records: list[dict], directory: Path) -> list[str]:
    """Each question naming its section: every snippet lies under that heading of that file."""
    problems: list[str] = []
    for record in records:
        if not (record.get("source") and record.get("section")):
            continue
        path = directory / record["source"]
        if not path.is_file():
            problems.append(f"{record['id']}: no file {record['source']}")
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        headings = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(lines)
                    if (m := _HEADING_RE.match(line))]
        starts = [(i, level) for i, level, title in headings if title == record["section"]]
        if len(starts) != 1:
            problems.append(f"{record['id']}: {len(starts)} headings {record['section']!r} in {record['source']}")
            continue
        start, level = starts[0]
        end = next((i for i, lv, _ in headings if i > start and lv <= level), len(lines))
        span = normalize("\n".join(lines[start:end]))
        for snippet in record["evidence"]:
            if normalize(snippet) not in span:
                problems.append(f"{record['id']}: snippet not under {record['section']!r}: {snippet[:60]!r}")
    return problems


def broad_sections(q: Question, corpus: Corpus) -> list[tuple[str, tuple[str, ...]]]:
    """(file, section) pairs that hold every snippet of ``q`` below the file's title.

    The section is the deepest heading common to the snippets' paragraphs; it
    must lie below the file's title unless the file has no subheadings.
    """
    located = [corpus.locate(s) for s in q.evidence]
    if not located or not all(located):
        return []
    out: list[tuple[str, tuple[str, ...]]] = []
    for name in sorted(set.intersection(*({n for n, _ in hits} for hits in located))):
        # one paragraph per snippet (the first in this file), so repeated phrases cannot widen the section
        indexes = {min(i for n, i in hits if n == name) for hits in located}
        section = corpus.common_section(name, indexes)
        if len(section) >= 2 or not corpus.has_subsections(name):
            out.append((name, section))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions", nargs="?", type=Path, default=None)
    parser.add_argument("--questions", dest="questions_option", type=Path, metavar="FILE",
                        help=f"the question set (default {DEFAULT_QUESTIONS.relative_to(HERE.parent)})")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="directory of Markdown files")
    parser.add_argument("--sections", action="store_true", help="print the section of each broad question")
    parser.add_argument("--min-chars", type=int, default=MIN_CHARS,
                        help=f"the shortest snippet allowed (default {MIN_CHARS})")
    args = parser.parse_args(argv)
    if args.questions and args.questions_option and args.questions != args.questions_option:
        parser.error("give the question set once (positional or --questions)")
    args.questions = args.questions_option or args.questions or DEFAULT_QUESTIONS
    try:
        questions = load_questions(args.questions)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    corpus = Corpus.load(args.corpus)
    problems = check(questions, corpus, min_chars=args.min_chars)
    records = [json.loads(line) for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    problems += section_problems(records, args.corpus)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) in {args.questions}", file=sys.stderr)
        return 1
    if args.sections:
        for q in questions:
            if q.kind == "broad":
                for name, section in broad_sections(q, corpus):
                    print(f"{q.id}: {name} § {' > '.join(section)}")
    kinds = Counter(q.kind for q in questions)
    files = sorted(set().union(*evidence_files(questions, corpus).values()))
    print(f"ok: {len(questions)} questions ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), "
          f"{sum(len(q.evidence) for q in questions)} snippets from {len(files)} files: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
