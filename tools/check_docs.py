"""`make check-docs`: every figure of the README and the docs pages is sourced and is HEAD's.

The citation convention (written for people as much as for this script):

* An HTML comment ``<!-- figures: bench/results/full.md -->`` (one or more
  paths, comma-separated) names the results file(s) of every paragraph and
  table after it.  In ``docs/performance.md``, the page of the measurements,
  every paragraph is checked: a citation holds up to the next one, and a
  paragraph or table with a figure and no citation fails the check.  In
  ``README.md`` and every other page under ``docs/``, which hold numbers that
  are not measurements (versions, defaults, limits), a citation holds up to
  the next citation or heading, and the paragraphs it covers are checked; a
  paragraph there that links to the performance page and has a figure but no
  citation fails the check (a headline figure must cite its file).
* A figure is any number written in the text (``6.3 M``, ``1.7k``, ``79×``,
  ``0.58–0.69`` is two figures, ``84 %``); numbers inside words (``L6``,
  ``x86_64``), link targets, comments and commit ids are not figures.  It
  matches when the cited file(s) hold a number that rounds to it at the
  page's precision after removing thousands separators and applying ``k``
  (×1,000) and ``M`` (×1,000,000): ``1.7k`` matches ``1,683``.
* Each cited file must record the commit it measured (``hrag-pg commit:
  <sha>`` in its header, or ``"hrag-pg commit": "<sha>"`` in its versions
  block; ``bench/run.py``, ``sql_latency.py`` and ``studies/ef_search.py`` write it),
  and ``git diff --quiet <sha> HEAD -- hrag_pg sql`` must hold: the code that
  determines speed and quality is HEAD's.  A paragraph or table that says
  ``measured at <sha>`` (it, or another paragraph under the same citation
  comment) is exempt from the HEAD comparison, but ``<sha>`` must
  be the commit its file records (or, for a file written before results
  recorded their commit, the commit that last wrote the file).

Exit status 0 when everything holds, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"<!--\s*figures:\s*(.+?)\s*-->")
MEASURED_AT = re.compile(r"measured\s+at\s+`?([0-9a-f]{7,40})`?")
RECORDED = re.compile(r"hrag-pg commit\"?\s*:\s*\"?`?([0-9a-f]{7,40}|unknown)`?(\s*\+ uncommitted[^\"\n]*)?")
# A figure: digits with optional thousands separators and decimals, optionally k/M, not inside a word.
FIGURE = re.compile(r"(?<![\w.\-/])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?([kM](?![\w]))?(?![\w])")
RANGE_SUFFIX = re.compile(r"(\d[\d.,]*)\s?–\s?(\d[\d.,]*)([kM])(?!\w)")
NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?")


@dataclass
class Block:
    text: str
    sources: list[str]
    line: int
    group: int  # blocks after the same citation comment share their "measured at" marks


#: The page of the measurements: every paragraph of it is checked.
PERFORMANCE = "docs/performance.md"
#: Where a citation holds up to the next heading; a paragraph linking here with a figure must cite.
CITED_ONLY = "cited"
HEADING = re.compile(r"^#{1,6} ")
LINKS_PERFORMANCE = re.compile(r"\]\((?:docs/|\.\./docs/)?performance\.md(?:#[^)]*)?\)")


def documents() -> list[tuple[str, str | None]]:
    """(path, scope) of every page checked: README.md and every page under docs/.

    The scope is None (every paragraph) for the performance page and ``CITED_ONLY`` for the others.
    """
    pages = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
    return [(page, None if page == PERFORMANCE else CITED_ONLY) for page in pages]


def performance_blocks(text: str, section: str | None = "Performance") -> list[Block]:
    """The paragraphs and tables of ``section`` (None or ``CITED_ONLY``: the whole text), each with its files.

    With ``CITED_ONLY`` a citation holds up to the next heading (outside code blocks).
    """
    cited_only = section == CITED_ONLY
    if section is None or cited_only:
        body, start_line = text + "\n", 1
    else:
        match = re.search(rf"^## {re.escape(section)}\s*$(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
        if not match:
            raise SystemExit(f"check-docs: no '## {section}' section")
        body, start_line = match.group(1), text[:match.start(1)].count("\n") + 1
    blocks: list[Block] = []
    sources: list[str] = []
    group = 0
    current: list[str] = []
    first = start_line
    fenced = False
    for offset, line in enumerate(body.split("\n")):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        if cited_only and not fenced and HEADING.match(line):
            sources = []  # a citation holds up to the next heading
        cited = CITATION.search(line)
        if cited:
            sources = [s.strip() for s in cited.group(1).split(",") if s.strip()]
            group += 1
            line = CITATION.sub("", line)
        if not line.strip():
            if current:
                blocks.append(Block("\n".join(current), sources, first, group))
            current = []
            first = start_line + offset + 1
            continue
        current.append(line)
    if current:
        blocks.append(Block("\n".join(current), sources, first, group))
    return blocks


def figures(text: str) -> list[tuple[str, float, int]]:
    """(as written, value, decimals) of every figure in ``text``."""
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    text = RANGE_SUFFIX.sub(r"\1\3–\2\3", text)  # "3.8–5.7k" is 3.8k and 5.7k
    text = MEASURED_AT.sub("", text)
    found = []
    for m in FIGURE.finditer(text):
        whole, decimals, scale = m.group(1), m.group(2) or "", m.group(3) or ""
        value = float(whole.replace(",", "") + decimals)
        places = len(decimals) - 1 if decimals else 0
        if scale == "k":
            value, places = value * 1_000, places - 3
        elif scale == "M":
            value, places = value * 1_000_000, places - 6
        found.append((m.group(0).strip(), value, places))
    return found


def numbers_in(text: str) -> list[float]:
    return [float(m.group(1).replace(",", "") + (m.group(2) or "")) for m in NUMBER.finditer(text)]


def matches(value: float, places: int, numbers: list[float]) -> bool:
    half = 0.5 * 10 ** (-places)
    return any(abs(n - value) <= half + 1e-9 for n in numbers)


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)


def commit_known(sha: str) -> str | None:
    """None if ``sha`` is in this clone, else why not (a shallow clone says how to fix it)."""
    if git("cat-file", "-e", f"{sha}^{{commit}}").returncode == 0:
        return None
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        return (f"commit {sha} is not in this shallow clone; fetch the history "
                "(git fetch --unshallow) and run make check-docs again")
    return f"commit {sha} does not exist in this repository"


def recorded_commit(path: Path) -> tuple[str | None, str | None]:
    """(commit the results file records, problem) — one of them is None."""
    found = RECORDED.search(path.read_text(encoding="utf-8"))
    if not found or found.group(1) == "unknown":
        return None, f"{path.relative_to(REPO)} does not record the commit it measured (hrag-pg commit: <sha>)"
    if found.group(2):
        return None, f"{path.relative_to(REPO)} was measured with uncommitted changes ({found.group(0).strip()})"
    return found.group(1), None


def last_written(path: Path) -> str | None:
    """The commit that last changed ``path`` (for results written before they recorded their commit).

    Moves are followed and are not changes: a file ``git mv``'d unchanged (``R100``) was written before.
    """
    log = git("log", "--follow", "--format=%h", "--name-status", "--", str(path.relative_to(REPO))).stdout
    commit = None
    for line in log.splitlines():
        if "\t" not in line and line.strip():
            commit = line.strip()
        elif commit and line.startswith(("A", "M", "C", "R")) and not line.startswith("R100"):
            return commit
    return None


def check(document: Path = REPO / "README.md", section: str | None = CITED_ONLY) -> list[str]:
    """One line per problem of the figures in ``section`` of ``document``.

    ``section`` None checks every paragraph of the file; ``CITED_ONLY`` the paragraphs under a citation
    and those that link to the performance page; otherwise the ``## section``.
    """
    problems: list[str] = []
    blocks = performance_blocks(document.read_text(encoding="utf-8"), section)
    name = str(document.relative_to(REPO)) if document.is_relative_to(REPO) else document.name
    for block in blocks:
        if section == CITED_ONLY and not block.sources and not LINKS_PERFORMANCE.search(block.text):
            continue
        found = figures(block.text)
        if not found:
            continue
        where = f"{name}:{block.line}"
        if not block.sources:
            problems.append(f"{where}: figures {[f for f, _, _ in found]} cite no results file "
                            "(add <!-- figures: bench/results/FILE.md --> before the paragraph)")
            continue
        paths = [REPO / s for s in block.sources]
        missing = [str(p.relative_to(REPO)) for p in paths if not p.is_file()]
        if missing:
            problems.append(f"{where}: cited results file(s) {missing} do not exist")
            continue
        numbers = [n for p in paths for n in numbers_in(p.read_text(encoding="utf-8"))]
        for written, value, places in found:
            if not matches(value, places, numbers):
                problems.append(f"{where}: figure {written!r} is not in {', '.join(block.sources)}")
        marked = [m.group(1) for b in blocks if b.group == block.group for m in MEASURED_AT.finditer(b.text)]
        for path in paths:
            sha, problem = recorded_commit(path)
            results = str(path.relative_to(REPO))
            if marked:
                expected = sha or last_written(path)
                if not any(expected and (m.startswith(expected[:7]) or expected.startswith(m[:7])) for m in marked):
                    source = f"records {sha}" if sha else f"records no commit and was last written at {expected}"
                    problems.append(f"{where}: says 'measured at {', '.join(marked)}' but {results} {source}")
                continue
            if problem:
                problems.append(f"{where}: {problem}; re-run the benchmark or mark the figures "
                                "'measured at <commit>'")
                continue
            assert sha is not None
            unknown = commit_known(sha)
            if unknown:
                problems.append(f"{where}: {unknown}")
                continue
            if git("diff", "--quiet", sha, "HEAD", "--", "hrag_pg", "sql").returncode != 0:
                problems.append(f"{where}: {results} measured commit {sha}, but hrag_pg/ or sql/ changed since; "
                                f"re-run the benchmark or mark the figures 'measured at {sha}'")
    return problems


def main() -> int:
    checked = documents()
    problems = [p for name, scope in checked for p in check(REPO / name, scope)]
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"check-docs: {len(problems)} problem(s) in the figures of README.md and docs/", file=sys.stderr)
        return 1
    print(f"check-docs: every figure of README.md and docs/ ({len(checked)} pages) is in the results file it cites")
    return 0


if __name__ == "__main__":
    sys.exit(main())
