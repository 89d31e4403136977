"""`hrag outline`: the heading tree indented by depth, with tokens and node ids, and its JSON."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrag_pg.api import HRAG
from hrag_pg.cli import app
from hrag_pg.ingest.markdown import parse_markdown
from tests.embedders import HashingEmbedder

runner = CliRunner()

HANDBOOK = """# Handbook

Welcome.

## Leave

Staff take leave after filing form A-1.

### Sick leave

Call the office before nine.

## Travel

Travel is booked two weeks ahead.
"""


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest_tree(parse_markdown(HANDBOOK, "handbook.md"), collection="manuals")
    hrag.ingest_tree(parse_markdown("# Notes\n\nA note.\n", "notes.md"), collection="other")
    return {"HRAG_DATABASE_URL": db_url, "HRAG_DATA_DIR": str(tmp_path / "unused"), "COLUMNS": "200"}


def test_outline_prints_the_tree_indented_by_depth_with_tokens_and_ids_that_show_expands(
    env: dict[str, str], db_url: str
) -> None:
    result = runner.invoke(app, ["outline", "-c", "manuals"], env=env)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["node", "tokens", "children", "outline"]
    entries = HRAG(db_url, embedder=HashingEmbedder()).outline(collection="manuals")
    assert len(lines) == 1 + len(entries) + 1 and "hrag show" in lines[-1]
    for line, entry in zip(lines[1:], entries, strict=False):
        node, tokens, children = line.split()[:3]
        assert (uuid.UUID(node), int(tokens.replace(",", "")), int(children)) == (
            entry.node_id, entry.token_count, entry.child_count)
    outline = [line.split(maxsplit=3)[3] for line in lines[1:-1]]
    start = lines[1].index(lines[1].split(maxsplit=3)[3])
    indents = [len(line[start:]) - len(line[start:].lstrip()) for line in lines[1:-1]]
    assert outline == ["handbook.md (manuals)", "Handbook", "Leave", "Sick leave", "Travel"]
    assert indents == [0, 2, 4, 6, 4]
    leave = lines[3].split()[0]
    shown = runner.invoke(app, ["show", leave], env=env)
    assert shown.exit_code == 0 and "Call the office before nine." in shown.stdout


def test_outline_json_is_the_entries_of_the_python_api(env: dict[str, str], db_url: str) -> None:
    result = runner.invoke(app, ["outline", "--source", "handbook.md", "--max-depth", "1", "--json"], env=env)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    expected = HRAG(db_url, embedder=HashingEmbedder()).outline(source="handbook.md", max_depth=1)
    assert payload == [e.model_dump(mode="json") for e in expected]
    assert [(p["depth"], p["title"], p["source"], p["collection"]) for p in payload] == [
        (0, "Handbook", "handbook.md", "manuals"), (1, "Handbook", "handbook.md", "manuals")]
    assert {"node_id", "document_id", "heading_path", "kind", "token_count", "child_count"} <= set(payload[0])


@pytest.mark.parametrize(("args", "message"), [
    (["--max-depth", "101"], "--max-depth must be between 0 and 100, got 101"),
    (["--source", "missing.md"], "no document 'missing.md' is stored"),
    (["-c", "nope"], "no collection 'nope' in this database"),
])
def test_bad_arguments_fail_in_one_line_naming_them(env: dict[str, str], args: list[str], message: str) -> None:
    result = runner.invoke(app, ["outline", *args], env=env)
    assert result.exit_code != 0
    assert message in " ".join(result.output.split())


@pytest.mark.parametrize("args", [["outline", "--max-depth", "5"], ["show", "BIG"]])
def test_a_reader_that_closes_the_pipe_early_is_not_an_error(env: dict[str, str], db_url: str,
                                                              args: list[str]) -> None:
    """``hrag outline | head -1``: the command stops quietly with status 0 when stdout's reader is gone."""
    import os
    import subprocess
    import sys

    hrag = HRAG(db_url, embedder=HashingEmbedder())
    sections = "\n".join(f"## Section {i}\n\nText {i} " + "word " * 50 for i in range(1000))  # (over a pipe's buffer)
    hrag.ingest_tree(parse_markdown(f"# Big\n\n{sections}\n", "big.md"), collection="manuals")
    big = hrag.outline(source="big.md", max_depth=0)[0].node_id
    command = [sys.executable, "-m", "hrag_pg", *[str(big) if a == "BIG" else a for a in args]]
    reading = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert reading.stdout is not None and reading.stderr is not None
    assert reading.stdout.read(100)  # the start, then the reader goes away (as head -1 or head -c 100 do)
    reading.stdout.close()
    assert reading.wait(timeout=60) == 0
    assert reading.stderr.read() == b""
