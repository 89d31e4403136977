"""The `hrag` command line: the JSON contract, human output, and one clear line per error."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hrag_pg.cli import app

pytestmark = pytest.mark.model
runner = CliRunner()


@pytest.fixture
def env(examples_url: str, tmp_path: Path) -> dict[str, str]:
    return {"HRAG_DATABASE_URL": examples_url, "HRAG_DATA_DIR": str(tmp_path / "unused")}


def run(env: dict[str, str], *args: str):
    return runner.invoke(app, list(args), env=env)


@pytest.mark.parametrize(("mode", "key"), [("parent-child", "matched_children"), ("auto-merge", "merged_from")])
def test_query_json_has_the_documented_shape(env: dict[str, str], mode: str, key: str) -> None:
    result = run(env, "query", "私物端末（BYOD）を業務で使う場合の義務をすべて教えてください",
                 "--mode", mode, "--collection", "security", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["mode"] == mode and payload["results"]
    for item in payload["results"]:
        assert {"node_id", "title", "heading_path", "content", "score", "depth", "kind", key, "hit_ratio"} <= set(item)
        uuid.UUID(item["node_id"])


def test_query_with_a_budget_reports_total_and_dropped(env: dict[str, str]) -> None:
    result = run(env, "query", "How do I secure a deployment?", "-c", "manual", "--max-tokens", "400", "--json")
    payload = json.loads(result.stdout)
    assert payload["total_tokens"] <= 400 and "dropped" in payload


def test_human_output_shows_path_score_and_why(env: dict[str, str]) -> None:
    result = run(env, "query", "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "-c", "hr")
    assert result.exit_code == 0
    assert "第4条：諸手当および福利厚生" in result.output and "matching child" in result.output


def test_show_prints_a_nodes_full_text_and_children(env: dict[str, str]) -> None:
    payload = json.loads(run(env, "query", "BYOD obligations", "-m", "auto-merge", "-c", "security",
                             "--json").stdout)
    node_id = payload["results"][0]["node_id"]
    shown = json.loads(run(env, "show", node_id, "--json").stdout)
    assert shown["id"] == node_id and shown["full_text"].startswith(shown["content"])


def test_stats_json_lists_the_collections(env: dict[str, str]) -> None:
    stats = json.loads(run(env, "stats", "--json").stdout)
    assert {c["collection"] for c in stats["collections"]} >= {"hr", "security", "manual"}
    assert stats["embedding_dim"] == 384


def test_ingest_and_delete_round_trip(env: dict[str, str], tmp_path: Path) -> None:
    doc = tmp_path / "note.md"
    doc.write_text("# Note\n\n## Part\n\nA short paragraph about pelicans.\n", encoding="utf-8")
    result = run(env, "ingest", str(doc), "--collection", "scratch", "--metadata", '{"animal": "pelican"}', "--json")
    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)["results"][0]
    assert (created["status"], created["source"]) == ("created", "note.md"), "a file is named by its file name"
    found = json.loads(run(env, "query", "pelicans", "--filter", '{"animal": "pelican"}', "--json").stdout)
    assert [r["source"] for r in found["results"]] == ["note.md"]
    assert run(env, "delete", "note.md", "--collection", "scratch").exit_code == 0
    again = run(env, "delete", "note.md", "--collection", "scratch")
    assert again.exit_code == 1 and "no source" in again.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("query", "x", "--mode", "sideways"), 2, "--mode must be one of parent-child, auto-merge"),
        (("query", ""), 2, "the question is empty"),
        (("query", "x", "--filter", "{not json"), 2, "--filter is not valid JSON"),
        (("query", "x", "--filter", "[1, 2]"), 2, "--filter must be a JSON object"),
        (("query", "x", "--top-k", "0"), 1, 'argument "top_k_children" must be between 1 and 1000'),
        (("query", "x", "-m", "auto-merge", "--merge-threshold", "2"), 1, 'merge_threshold" must be in (0, 1]'),
        (("show", "not-a-uuid"), 2, "is not a node id"),
        (("show", "00000000-0000-0000-0000-000000000000"), 1, "no node"),
        (("delete", "never-ingested.md"), 1, "no source"),
        (("ingest", "/no/such/file.md"), 1, "no such file or directory"),
        (("ingest", "README.md", "--strategy", "poetry"), 2, "unknown strategy 'poetry'"),
    ],
)
def test_errors_are_one_clear_line_and_a_nonzero_exit(env: dict[str, str], args, code: int, message: str) -> None:
    result = run(env, *args)
    assert result.exit_code == code, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_an_unreachable_database_is_one_clear_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["stats"], env={"HRAG_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert result.exit_code == 1
    assert "Cannot connect to PostgreSQL at postgresql+psycopg://u@127.0.0.1:1/x" in result.output


def test_db_status_of_an_uninitialised_data_dir_exits_3(tmp_path: Path) -> None:
    result = runner.invoke(app, ["db", "status"], env={"HRAG_DATA_DIR": str(tmp_path / "fresh")})
    assert result.exit_code == 3 and "not initialised" in result.output


@pytest.mark.parametrize(
    "command", ["db", "migrate", "ingest", "query", "show", "delete", "stats", "check", "eval", "demo"]
)
def test_every_command_explains_itself(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and len(result.output) > 200


def test_eval_reports_recall_per_kind_as_json(env: dict[str, str]) -> None:
    questions = Path(__file__).parents[1] / "fixtures" / "demo_questions.jsonl"
    result = run(env, "eval", str(questions), "--mode", "auto-merge", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    assert set(summary) == {"narrow", "broad", "all"}
    assert summary["narrow"]["questions"] == 2 and 0.0 <= summary["all"]["recall"] <= 1.0
    assert summary["all"]["latency_p95_ms"] >= summary["all"]["latency_p50_ms"] > 0


def test_eval_refuses_a_file_that_is_not_jsonl(env: dict[str, str]) -> None:
    result = run(env, "eval", "README.md")
    assert result.exit_code == 2 and "not valid JSON" in result.output
