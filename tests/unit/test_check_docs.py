"""`make check-docs` (tools/check_docs.py) fails on the faults of README and docs figures it exists to catch."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def check_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs", REPO / "tools" / "check_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_docs"] = module
    spec.loader.exec_module(module)
    return module


def _edited(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of the repository's document ``name`` with ``old`` replaced by ``new``."""
    text = (REPO / name).read_text(encoding="utf-8")
    assert old in text, f"{name} no longer contains {old!r}: update this test"
    path = tmp_path / Path(name).name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _readme(tmp_path: Path, old: str, new: str) -> Path:
    return _edited(tmp_path, "README.md", old, new)


def _performance(tmp_path: Path, old: str, new: str) -> Path:
    return _edited(tmp_path, "docs/performance.md", old, new)


def test_the_readme_and_every_docs_page_are_checked_and_the_performance_page_whole(
        check_docs: ModuleType) -> None:
    checked = dict(check_docs.documents())
    pages = {"README.md"} | {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert set(checked) == pages
    assert checked["docs/performance.md"] is None
    assert {scope for page, scope in checked.items() if page != "docs/performance.md"} == {check_docs.CITED_ONLY}


def test_the_repository_s_figures_pass(check_docs: ModuleType) -> None:
    assert [p for page, scope in check_docs.documents() for p in check_docs.check(REPO / page, scope)] == []


def test_a_figure_missing_from_its_results_file_is_reported(check_docs: ModuleType, tmp_path: Path) -> None:
    # The stale figure of issue 14: 0.69 came from a replaced run.
    page = _performance(tmp_path, "is 0.635 with", "is 0.635–0.69 with")
    problems = check_docs.check(page, None)
    assert any("figure '0.69' is not in bench/results/scale-full.md" in p for p in problems), problems


def test_figures_of_older_code_need_an_explicit_measured_at(check_docs: ModuleType, tmp_path: Path) -> None:
    page = _performance(tmp_path, "(measured at 4876567, same database", "(measured on the same database")
    problems = check_docs.check(page, None)
    assert any(("bench/studies/results/revision-ab-0011-vs-0010-pgdocs.md measured commit" in p
                and "but hrag_pg/ or sql/ changed since" in p)
               or "not in this shallow clone" in p for p in problems), problems


def test_a_wrong_measured_at_is_reported(check_docs: ModuleType, tmp_path: Path) -> None:
    page = _performance(tmp_path, "`bench/sql_latency.py --full`, measured at\n961b785",
                        "`bench/sql_latency.py --full`, measured at\n2418218")
    problems = check_docs.check(page, None)
    assert any("says 'measured at 2418218' but bench/results/scale-full.md records" in p for p in problems), problems


def test_a_results_file_moved_unchanged_was_written_before_the_move(check_docs: ModuleType) -> None:
    # ef-search-1000000.md records no commit; docs/performance.md says "measured at 7096475", the commit that
    # wrote it, and git mv to bench/studies/results/ (content unchanged) must not count as writing it.
    if check_docs.git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone lacks the history before the move")
    written = check_docs.last_written(REPO / "bench" / "studies" / "results" / "ef-search-1000000.md")
    assert written is not None and written.startswith("7096475"), written


def test_an_uncited_paragraph_with_figures_on_the_performance_page_is_reported(
        check_docs: ModuleType, tmp_path: Path) -> None:
    page = _performance(tmp_path, "<!-- figures: bench/results/full.md -->\nMeasured on", "Measured on")
    problems = check_docs.check(page, None)
    assert any("cite no results file" in p for p in problems), problems


def test_a_readme_headline_figure_missing_from_its_results_file_is_reported(
        check_docs: ModuleType, tmp_path: Path) -> None:
    readme = _readme(tmp_path, "1,356 tokens on average", "1,256 tokens on average")
    problems = check_docs.check(readme)
    assert any("figure '1,256' is not in bench/results/budget-pgdocs.md" in p for p in problems), problems


def test_a_readme_figure_linking_to_the_performance_page_without_a_citation_is_reported(
        check_docs: ModuleType, tmp_path: Path) -> None:
    readme = _readme(tmp_path, "<!-- figures: bench/results/budget-pgdocs.md -->\n", "")
    problems = check_docs.check(readme)
    assert any("README.md:" in p and "cite no results file" in p for p in problems), problems


def test_a_readme_citation_ends_at_the_next_heading(check_docs: ModuleType, tmp_path: Path) -> None:
    # A version or a default under the next heading is not a measurement and is not checked.
    readme = _readme(tmp_path, "## Documentation\n", "## Documentation\n\nPython 3.10 and 977 pages.\n")
    assert check_docs.check(readme) == []
    # Under the citation it is.
    readme = _readme(tmp_path, "\n## Documentation\n", "Python 3.10 and 977 pages.\n\n## Documentation\n")
    assert any("figure '977' is not in bench/results/full.md" in p for p in check_docs.check(readme))


@pytest.mark.parametrize(("written", "value", "places"), [("1.7k", 1700.0, -2), ("6.3 M", 6_300_000.0, -5),
                                                  ("2,000", 2000.0, 0), ("79", 79.0, 0), ("0.58", 0.58, 2)])
def test_figures_are_read_with_their_precision(check_docs: ModuleType, written: str, value: float,
                                               places: int) -> None:
    [(_, got, got_places)] = check_docs.figures(f"about {written} nodes")
    assert (got, got_places) == (value, places)
    assert check_docs.matches(got, got_places, [value + 0.4 * 10 ** (-places)])
    assert not check_docs.matches(got, got_places, [value + 0.6 * 10 ** (-places)])
