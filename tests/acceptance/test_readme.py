"""Every command of the README runs: its Python, CLI and adapter quickstarts, against a test database.

The README's fenced blocks are read by their language: the ```python blocks
run in order in one namespace (the quickstart's ``hrag`` is the one the
adapters use), every ``hrag …`` line of a ```sh block runs through the CLI,
and the ```sql blocks run in ``test_readme_sql.py`` on the demo's data.  The
other shell lines install or run make targets; each is named here with where
it runs.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrag_pg import db
from hrag_pg.cli import app

pytestmark = pytest.mark.model
README = Path(__file__).resolve().parents[2] / "README.md"
#: What the quickstart's ``docs/`` holds: the question "How do I rotate the certificates?" hits its first section.
HANDBOOK = """# Operations handbook

## Certificates

Rotate the certificates every 90 days with `certctl rotate --all`; the old ones stay valid for a day.

Certificates are stored in the vault under `tls/`, one entry per host.

## Backups

Backups of every database run nightly at 02:00 and are kept for 30 days.

## Holidays

Employees receive twenty paid holidays a year.
"""
#: The README's shell lines that are not ``hrag`` commands, and where each of them runs.
RUN_ELSEWHERE = {
    "make demo": "tests/acceptance/test_demo_cases.py asks the demo's questions of the same examples",
    "make test": "CI runs it (.ci/run)",
    "pip install torch==2.13.0": "make's install target installs it first",
    "pip install '.[embedded,embed,multilingual]'": "make's install target installs these extras (editable)",
    "pip install '.[langchain,llama-index]'": "make's install target installs these extras (editable)",
}


def blocks(language: str, page: Path = README) -> list[str]:
    """The fenced blocks of ``page`` (the README) tagged ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)


def shell_commands() -> list[list[str]]:
    """Every command line of the README's ```sh blocks, split as a shell would, comments dropped."""
    return [words for block in blocks("sh") for line in block.splitlines()
            if (words := shlex.split(line, comments=True))]


@pytest.fixture
def quickstart_dir(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with the ``docs/`` the quickstarts ingest, and the test database as the default."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "handbook.md").write_text(HANDBOOK, encoding="utf-8")
    monkeypatch.setenv(db.ENV_URL, db_url)
    monkeypatch.setenv("HRAG_DATA_DIR", str(tmp_path / "unused"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_has_a_python_a_cli_a_psql_and_an_adapter_quickstart() -> None:
    python = blocks("python")
    assert any("HRAG.open()" in b and "hrag.ingest(" in b for b in python)
    assert any("integrations.langchain" in b for b in python) and any("integrations.llama_index" in b for b in python)
    assert [w[:2] for w in shell_commands() if w[0] == "hrag"] == [["hrag", "ingest"], ["hrag", "query"],
                                                                  ["hrag", "query"]]
    assert blocks("sql")


def test_every_readme_shell_line_is_an_hrag_command_or_names_where_it_runs() -> None:
    for words in shell_commands():
        assert words[0] == "hrag" or shlex.join(words) in {shlex.join(shlex.split(c)) for c in RUN_ELSEWHERE}, words


def test_the_readme_python_quickstart_and_adapters_answer_in_every_mode(
        quickstart_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "readme"}
    for block in blocks("python"):
        exec(compile(block, f"README.md ({block.splitlines()[0]})", "exec"), namespace)
    out = capsys.readouterr().out
    # parent-child, auto-merge and the budget mode each printed the section that holds the answer
    assert out.count("Certificates") >= 3, out
    assert "handbook.md" in out
    documents, nodes = namespace["documents"], namespace["nodes"]
    assert isinstance(documents, list) and documents[0].metadata["source"] == "handbook.md"
    assert "certctl rotate" in documents[0].page_content
    assert isinstance(nodes, list) and "certctl rotate" in nodes[0].node.get_content()


def test_the_readme_cli_quickstart_ingests_and_answers_with_a_budget_and_by_auto_merge(quickstart_dir: Path) -> None:
    runner = CliRunner()
    outputs = []
    for words in shell_commands():
        if words[0] != "hrag":
            continue
        result = runner.invoke(app, words[1:])
        assert result.exit_code == 0, (words, result.output)
        outputs.append(result.stdout)
    ingested, budget, merged = outputs
    assert "handbook.md" in ingested
    assert "certctl rotate" in budget
    payload = json.loads(merged)
    assert payload["mode"] == "auto-merge" and "certctl rotate" in payload["results"][0]["content"]


#: What the guide's example asks of ``docs/`` ("How long are messages kept?", "How do I secure it?").
MESSAGING = """# Messaging service manual

## Retention

Messages are kept for 30 days, then deleted with their attachments.

## Security

Secure the service with TLS on every listener and rotate the server certificate yearly.

Restrict the admin console to the operations network.
"""


def test_the_guides_example_answers_its_questions(quickstart_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/guide.md's example: parent-child prints the retention section whole, the budget mode cites the
    security text's source, and auto-merge's context holds it."""
    (quickstart_dir / "docs" / "messaging.md").write_text(MESSAGING, encoding="utf-8")
    (example,) = blocks("python", README.parent / "docs" / "guide.md")
    namespace: dict[str, object] = {"__name__": "guide"}
    exec(compile(example, "docs/guide.md", "exec"), namespace)
    out = capsys.readouterr().out
    retention, _, rest = out.partition("kept for 30 days")  # parent-child first: the retention section whole
    assert "Messaging service manual › Retention" in retention and "parent of" in retention, out
    assert "messaging.md" in rest and "TLS on every listener" in rest, out  # the budget mode, then auto-merge
    context = namespace["context"]
    assert "TLS on every listener" in context.text  # type: ignore[attr-defined]


def test_the_modes_pages_settings_are_valid_settings() -> None:
    """docs/modes.md's settings objects: each line makes one, so each value is one the settings accept."""
    from hrag_pg.settings import AutoMergeSettings, BudgetSettings, ParentChildSettings

    (example,) = blocks("python", README.parent / "docs" / "modes.md")
    imports, *expressions = [line for line in example.splitlines() if line.strip()]
    namespace: dict[str, object] = {}
    exec(imports, namespace)
    made = [eval(line, namespace) for line in expressions]  # (the page's own lines, each an expression)
    assert [type(m) for m in made] == [ParentChildSettings, AutoMergeSettings, BudgetSettings]
