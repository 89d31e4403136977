"""The `hrag` command line: the JSON contract, human output, and one clear line per error."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from hrag_pg.main import app

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


def test_query_with_a_budget_keeps_what_fits_by_score_drops_the_rest_and_exits_0(env: dict[str, str]) -> None:
    """``--max-tokens 400``: the best section (325 tokens) is kept, the next three (308-341) do not fit.

    Each of them is replaced by the best part of it that fits what is left (issue 10's budget rule),
    never cut in the middle of a node.
    """
    question = "How do I secure a deployment?"
    result = run(env, "query", question, "-c", "manual", "--mode", "parent-child", "--max-tokens", "400", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    unbounded = json.loads(run(env, "query", question, "-c", "manual", "--mode", "parent-child",
                               "--json").stdout)["results"]
    parts = [r for r in payload["results"] if "fits the budget" in (r.get("reason") or "")]
    kept, dropped = [r for r in payload["results"] if r not in parts], payload["dropped"]
    assert [r["heading_path"][-1] for r in kept] == ["TLS Encryption"]
    assert all(any(p["content"] in d["content"] for d in dropped) for p in parts)
    assert [r["heading_path"][-1] for r in dropped] == [
        "Hardening Checklist", "Starting a Three-Node Cluster", "Durability and the fsync Policy"]
    assert payload["total_tokens"] == sum(r["token_count"] for r in kept + parts) <= 400
    # Nothing lost, nothing cut: kept + dropped are the unbounded results, each whole.
    assert sorted(r["node_id"] for r in kept + dropped) == sorted(r["node_id"] for r in unbounded)
    whole = {r["node_id"]: r["content"] for r in unbounded}
    assert all(r["content"] == whole[r["node_id"]] for r in kept + dropped)
    assert all(r["token_count"] > 400 - payload["total_tokens"] for r in dropped), "a dropped result would fit"


def test_human_output_shows_path_score_and_why(env: dict[str, str]) -> None:
    result = run(env, "query", "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "-c", "hr")
    assert result.exit_code == 0
    assert result.output.startswith("budget mode (auto), 2,000-token budget: "), "the mode and budget come first"
    assert "第4条：諸手当および福利厚生" in result.output and "children hit" in result.output
    parent_child = run(env, "query", "試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", "-c", "hr",
                       "--mode", "parent-child")
    assert parent_child.output.startswith("parent-child: ") and "matching child" in parent_child.output


def test_show_prints_a_nodes_full_text_and_children(env: dict[str, str]) -> None:
    payload = json.loads(run(env, "query", "BYOD obligations", "-m", "auto-merge", "-c", "security",
                             "--json").stdout)
    node_id = payload["results"][0]["node_id"]
    shown = json.loads(run(env, "show", node_id, "--json").stdout)
    passage = payload["results"][0]
    assert shown["node_id"] == node_id and shown["content"] == passage["content"]
    assert shown["token_count"] == passage["token_count"]  # one count for one node: its whole text's


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
    found = json.loads(run(env, "query", "pelicans", "-c", "scratch", "--filter", '{"animal": "pelican"}',
                           "--json").stdout)
    assert [r["source"] for r in found["results"]] == ["note.md"]
    assert run(env, "delete", "note.md", "--collection", "scratch").exit_code == 0
    again = run(env, "delete", "note.md", "--collection", "scratch")
    assert again.exit_code == 1 and "no source" in again.output


def test_ingest_says_first_which_model_writes_a_new_collection_and_why(env: dict[str, str], tmp_path: Path) -> None:
    rules = tmp_path / "rules.md"
    rules.write_text("# 就業規則\n\n## 第4条\n\n通勤手当は毎月25日に支給する。\n", encoding="utf-8")
    result = run(env, "ingest", str(rules), "-c", "rules-ja")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("model multilingual-e5-small-q4: a new collection: ") and "Japanese" in first, first
    again = run(env, "ingest", str(rules), "-c", "rules-ja")
    assert again.stdout.splitlines()[0] == ("model multilingual-e5-small-q4: the model collection 'rules-ja' is "
                                            "embedded with")


def test_a_folder_of_images_is_one_skipped_line_and_verbose_lists_them(env: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "manual"
    (folder / "img").mkdir(parents=True)
    (folder / "guide.md").write_text("# Guide\n\n## Start\n\nPress the green button.\n", encoding="utf-8")
    for i in range(41):
        (folder / "img" / f"shot{i:02}.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    (folder / "img" / "logo.svg").write_text("<svg/>", encoding="utf-8")
    result = run(env, "ingest", str(folder), "-c", "images")
    assert result.exit_code == 0, result.output
    skipped = [line for line in result.stdout.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 2, skipped  # one line per reason, not per file
    assert sorted("41 files: unsupported file type '.png'" in line for line in skipped) == [False, True]
    assert any("logo.svg: unsupported file type '.svg'" in line for line in skipped)
    listed = run(env, "ingest", str(folder), "-c", "images", "--verbose")
    assert sum(line.startswith("skipped") for line in listed.stdout.splitlines()) == 42


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("query", "x", "--mode", "sideways"), 2, "--mode must be one of parent-child, auto-merge"),
        (("query", ""), 2, "the question is empty"),
        (("query", "x", "--filter", "{not json"), 2, "--filter is not valid JSON"),
        (("query", "x", "--filter", "[1, 2]"), 2, "--filter must be a JSON object"),
        (("query", "x", "--top-k", "0"), 2, "--top-k must be between 1 and 1000, got 0"),
        (("query", "x", "-m", "auto-merge", "--merge-threshold", "2"), 2, "--merge-threshold must be in (0, 1]"),
        (("show", "not-a-uuid"), 2, "is not a node id"),
        (("show", "00000000-0000-0000-0000-000000000000"), 1, "no node"),
        (("delete", "never-ingested.md"), 1, "no source"),
        (("ingest", "/no/such/file.md"), 2, "no such file or directory"),
        (("ingest", "README.md", "--strategy", "poetry"), 2, "unknown strategy 'poetry'"),
        (("ingest", "README.md", "--child", "qa"), 2, "--child qa needs a question generator"),
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


#: What each command's --help must document: its subcommands or arguments and its key options.
HELP: dict[str, list[str]] = {
    "": ["migrate", "ingest", "query", "show", "delete", "sources", "outline", "distribute", "stats", "reembed",
         "check", "eval", "demo", "db", "serve", "--version"],
    "db": ["start", "stop", "status", "url"],
    "migrate": ["revision", "--embedding-dim"],
    "ingest": ["paths", "--collection", "--strategy", "--child", "--max-child-tokens", "--overlap-tokens",
               "--max-parent-tokens", "--window-tokens", "--errors", "--force", "--bulk", "--metadata", "--source",
               "--model", "--json"],
    "query": ["text", "--mode", "--collection", "--top-k", "--max-parents", "--merge-threshold", "--max-tokens",
              "--filter", "--lexical-weight", "--min-relative-score", "--model", "--json"],
    "show": ["node_id", "--json"],
    "delete": ["source", "--collection"],
    "sources": ["--collection", "--rename-from-paths", "--dry-run", "--json"],
    "outline": ["--collection", "--source", "--max-depth", "--json"],
    "distribute": [],
    "stats": ["--json"],
    "reembed": ["--collection", "--model", "--cancel", "--json"],
    "check": ["--repair", "--json"],
    "eval": ["questions", "--mode", "--collection", "--max-tokens", "--lexical-weight", "--json"],
    "demo": ["--max-lines"],
    "serve": ["--host", "--port", "--mcp", "--model", "--max-body-mb", "HRAG_SERVER_TOKEN", "HRAG_SERVER_URL"],
}


@pytest.mark.parametrize("command", list(HELP), ids=lambda c: c or "hrag")
def test_every_command_documents_its_arguments_and_options(command: str) -> None:
    result = runner.invoke(app, [*command.split(), "--help"], prog_name="hrag", terminal_width=200)
    assert result.exit_code == 0, result.output
    assert f"Usage: hrag {command}".rstrip() in " ".join(result.output.split())
    missing = [word for word in HELP[command] if word.lower() not in result.output.lower()]
    assert missing == [], f"`hrag {command} --help` does not document {missing}"


def test_the_top_level_help_lists_every_registered_command() -> None:
    registered = set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
    assert registered == set(HELP) - {""}, "a command was added or removed: update HELP"


def test_eval_reports_recall_per_kind_as_json(env: dict[str, str]) -> None:
    questions = Path(__file__).parents[1] / "fixtures" / "demo_questions.jsonl"
    result = run(env, "eval", str(questions), "--mode", "auto-merge", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    summary = report["summary"]
    assert set(summary) == {"narrow", "broad", "all"}
    assert [summary[k]["questions"] for k in ("narrow", "broad", "all")] == [2, 1, 3]
    # Every evidence snippet of the three demo questions is found (the demo's answers are right).
    assert [summary[k]["recall"] for k in ("narrow", "broad", "all")] == [1.0, 1.0, 1.0]
    assert [summary[k]["full_recall_rate"] for k in ("narrow", "broad", "all")] == [1.0, 1.0, 1.0]
    assert summary["all"]["mean_tokens"] == pytest.approx(
        (2 * summary["narrow"]["mean_tokens"] + summary["broad"]["mean_tokens"]) / 3)
    assert summary["all"]["latency_p95_ms"] >= summary["all"]["latency_p50_ms"] > 0


def test_eval_with_max_tokens_measures_the_budget_mode_within_its_budget_as_query_would(
        env: dict[str, str]) -> None:
    questions = Path(__file__).parents[1] / "fixtures" / "demo_questions.jsonl"
    result = run(env, "eval", str(questions), "--max-tokens", "600", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["settings"]["mode"] == "auto"
    summary = report["summary"]
    assert [summary[k]["recall"] for k in ("narrow", "broad", "all")] == [1.0, 1.0, 1.0]
    assert summary["all"]["mean_tokens"] <= 600


def test_eval_refuses_a_file_that_is_not_jsonl(env: dict[str, str]) -> None:
    result = run(env, "eval", "README.md")
    assert result.exit_code == 2 and "not valid JSON" in result.output
