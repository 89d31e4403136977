"""The CLI as an operator meets it: literal output, no tracebacks, roles, safe migrations, limits, help.

Most tests need no embedding model: documents are ingested through the
Python API with a deterministic embedder whose token counter is the real
model's tokenizer, and the CLI runs with ``HRAG_EMBEDDING_MODEL`` pointing at
a copy of the bundled model whose *weights are garbage*.  A command that
loads the model therefore fails loudly, which is how these tests prove that
``show``, ``stats``, ``check``, argument errors and unchanged re-ingests never
load it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from hrag_pg import db, embedding
from hrag_pg.api import HRAG
from hrag_pg.cli import app
from hrag_pg.embedders import sentence_transformers as st_backend
from hrag_pg.ingest.tokens import TokenCounter, TokenizerCounter
from tests.embedders import HashingEmbedder

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def weightless_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled model's folder with its tokenizer intact and its weights replaced by garbage."""
    real = Path(embedding.default_model_path())
    copy = tmp_path_factory.mktemp("weightless-model")
    for item in real.iterdir():
        if item.name != "model.safetensors":
            (copy / item.name).symlink_to(item)
    (copy / "model.safetensors").write_bytes(b"these are not weights")
    return copy


class TokenizerEmbedder(HashingEmbedder):
    """Hashing vectors, but the model name and token counts of ``model_dir`` (so hashes match the CLI's)."""

    def __init__(self, model_dir: Path) -> None:
        super().__init__()
        self.model_name = str(model_dir)
        self._tokens = TokenizerCounter(st_backend.load_tokenizer(str(model_dir)))
        # the identity the CLI's model has (weights fingerprint included), read without loading it
        self.identity = st_backend.SentenceTransformerEmbedder(str(model_dir)).identity

    @property
    def token_counter(self) -> TokenCounter:
        return self._tokens


@pytest.fixture
def env(db_url: str, weightless_model: Path, tmp_path: Path) -> dict[str, str]:
    return {"HRAG_DATABASE_URL": db_url, "HRAG_DATA_DIR": str(tmp_path / "unused"),
            "HRAG_EMBEDDING_MODEL": str(weightless_model), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def cli(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real `hrag` in a fresh process (no model or engine cached from other tests)."""
    full = {**os.environ, **env, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    return subprocess.run([sys.executable, "-m", "hrag_pg", *args], env=full, cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def invoke(env: dict[str, str], *args: str):
    return runner.invoke(app, list(args), env=env)


def model_loads() -> int:
    info = st_backend.load_model.cache_info()
    return info.hits + info.misses


BRACKETS_MD = "# Tools\n\n## Hosts\n\nEdit [/etc/hosts] first.\n\n[pip-tools] is a package for pinning.\n"


@pytest.fixture
def stored(db_url: str, weightless_model: Path, tmp_path: Path) -> tuple[HRAG, Path]:
    """A file named ``[bold]name.md`` with bracketed text, ingested into collection ``[/x]``."""
    doc = tmp_path / "[bold]name.md"
    doc.write_text(BRACKETS_MD, encoding="utf-8")
    hrag = HRAG(db_url, embedder=TokenizerEmbedder(weightless_model))
    report = hrag.ingest([doc], collection="[/x]")
    assert not report.failed, report.failed
    return hrag, doc


def node_id_of(db_url: str, title: str) -> str:
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        return str(conn.execute("SELECT id FROM hrag.nodes WHERE title = %s", (title,)).fetchone()[0])


# ------------------------------------------------------------ 1. stored text is literal


def test_show_prints_brackets_in_stored_text_literally(env: dict[str, str], db_url: str, stored) -> None:
    result = invoke(env, "show", node_id_of(db_url, "Hosts"))
    assert result.exit_code == 0, result.output
    assert "Edit [/etc/hosts] first." in result.stdout and "[pip-tools] is a package" in result.stdout


def test_stats_prints_a_bracketed_collection_name(env: dict[str, str], stored) -> None:
    result = invoke(env, "stats")
    assert result.exit_code == 0, result.output
    assert "[/x]" in result.stdout


def test_ingest_report_names_a_bracketed_file_literally_and_reuses_hashes_without_the_model(
        env: dict[str, str], stored) -> None:
    _, doc = stored
    result = cli(env, "ingest", str(doc), "-c", "[/x]")
    assert result.returncode == 0, result.stderr
    # A file named directly is stored under its file name (docs/guide.md), printed literally.
    assert f"unchanged {doc.name} " in result.stdout and doc.name == "[bold]name.md"
    assert "1 document, " in result.stdout and "0 texts embedded" in result.stdout


@pytest.mark.model
def test_query_output_prints_brackets_literally(db_url: str, tmp_path: Path) -> None:
    doc = tmp_path / "tools.md"
    doc.write_text(BRACKETS_MD, encoding="utf-8")
    HRAG(db_url).ingest([doc], collection="tools")
    result = invoke({"HRAG_DATABASE_URL": db_url}, "query", "Which package pins versions?", "-c", "tools")
    assert result.exit_code == 0, result.output
    assert "[pip-tools] is a package for pinning." in result.stdout


# ----------------------------------------------------------------- 3. no traceback ever

#: Every subcommand with bad arguments: (args, exit status, what the one line must say).
BAD_ARGUMENTS = [
    (("query", "x", "--top-k", "abc"), 2, "--top-k"),
    (("query", "x", "--top-k", "0"), 2, "--top-k must be between 1 and 1000, got 0"),
    (("query", "x", "--top-k", "1200"), 2, "--top-k must be between 1 and 1000, got 1200"),
    (("query", "x", "-m", "parent-child", "--max-parents", "-1"), 2,
     "--max-parents must be between 1 and 1000, got -1"),
    (("query", "x", "-m", "auto-merge", "--merge-threshold", "2"), 2, "--merge-threshold must be in (0, 1], got 2.0"),
    (("query", "x", "--lexical-weight", "nan"), 2, "--lexical-weight must be in [0, 1]"),
    (("query", "x", "--min-relative-score", "0"), 2, "--min-relative-score must be in (0, 1]"),
    (("query", "x", "--max-tokens", "0"), 2, "--max-tokens must be between 1 and"),
    (("query", "x", "--mode", "sideways"), 2, "--mode must be one of parent-child, auto-merge"),
    (("query", "x", "--filter", "{bad"), 2, "--filter is not valid JSON"),
    (("query", "x", "--filter", "[1]"), 2, "--filter must be a JSON object"),
    (("query", ""), 2, "the question is empty"),
    (("query",), 2, "Missing argument"),
    (("query", "x", "-c", "nothere"), 1, "no collection 'nothere' in this database; collections:"),
    (("query", "x", "--no-such-flag"), 2, "No such option"),
    (("query", "--track-origins"), 2, "starts with '-', put -- before it: "),
    (("show", "not-a-uuid"), 2, "is not a node id"),
    (("show", "00000000-0000-0000-0000-000000000000"), 1, "no node"),
    (("show",), 2, "Missing argument"),
    (("delete", "never.md"), 1, "no source 'never.md' in collection 'default'"),
    (("stats", "extra"), 2, "unexpected extra argument"),
    (("check", "--repair=maybe"), 2, "--repair"),
    (("ingest", "no/such/file.md"), 2, "no/such/file.md: no such file or directory"),
    (("ingest", "pyproject.toml"), 2, "pyproject.toml: unsupported file type '.toml'"),
    (("ingest", "README.md", "--strategy", "poetry"), 2, "unknown strategy 'poetry'"),
    (("ingest", "README.md", "--child", "haiku"), 2, "unknown child strategy 'haiku'"),
    (("ingest", "README.md", "--max-child-tokens", "0"), 2, "--max-child-tokens must be between 1 and"),
    (("ingest", "README.md", "--overlap-tokens", "-5"), 2, "--overlap-tokens must be between 0 and"),
    (("ingest", "README.md", "--errors", "ignore"), 2, "--errors must be strict or replace"),
    (("ingest", "README.md", "--overlap-tokens", "150"), 2,
     "--overlap-tokens (150) must be less than --max-child-tokens (150)"),
    (("ingest", "README.md", "docs", "--source", "x"), 2, "--source names one file or prefixes one directory"),
    (("ingest", "README.md", "--source", " "), 2, "--source must not be empty"),
    (("sources", "--dry-run"), 2, "--dry-run only goes with --rename-from-paths"),
    (("sources", "--rename-from-paths", "no/such/dir"), 2, "no/such/dir: no such file or directory"),
    (("ingest", "README.md", "-c", " "), 2, "--collection must not be empty"),
    (("eval", "nothere.jsonl"), 2, "nothere.jsonl: no such file"),
    (("eval", "README.md"), 2, "README.md:1: not valid JSON"),
    (("eval", "tests/fixtures/demo_questions.jsonl", "--mode", "up"), 2, "--mode must be one of"),
    (("eval", "tests/fixtures/demo_questions.jsonl", "--max-tokens", "-1"), 2, "--max-tokens must be between"),
    (("migrate", "nonsense_rev"), 2, "unknown revision 'nonsense_rev'; choose head, base or one of 0001"),
    (("migrate", "--embedding-dim", "0"), 2, "embedding"),
    (("migrate", "--embedding-dim", "768"), 1, "this database stores 384-dimensional vectors"),
    (("migrate", "base"), 2, "add --yes to confirm"),
    (("demo", "--max-lines", "0"), 2, "--max-lines must be between 1 and"),
    (("db", "status", "--json=1"), 2, "--json"),
    (("db", "nothing"), 2, "No such command 'nothing'"),
    (("nonsense",), 2, "No such command 'nonsense'"),
]


@pytest.mark.parametrize(("args", "code", "message"), BAD_ARGUMENTS, ids=[" ".join(a[0]) for a in BAD_ARGUMENTS])
def test_every_subcommand_refuses_bad_arguments_in_one_line_without_a_traceback(
        env: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], code: int, message: str) -> None:
    monkeypatch.chdir(REPO)
    loads = model_loads()
    result = invoke(env, *args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0]
    assert model_loads() == loads, "an argument error loaded the embedding model"


def test_a_question_starting_with_a_dash_is_told_how_to_pass_it(env: dict[str, str]) -> None:
    result = invoke(env, "query", "--track-origins: what does it show?")
    assert result.exit_code == 2
    assert "query [OPTIONS] -- '--track-origins: what does it show?'" in result.stderr


def test_a_misspelt_option_gets_click_suggestion_not_the_dash_hint(env: dict[str, str]) -> None:
    result = invoke(env, "query", "x", "--max-token", "5")
    assert result.exit_code == 2
    assert "--max-tokens" in result.stderr and "put -- before it" not in result.stderr


def test_an_unexpected_error_is_one_line_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import hrag_pg.cli

    def broken() -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(hrag_pg.cli.core, "open_hrag", broken)
    monkeypatch.delenv("HRAG_DEBUG", raising=False)
    result = runner.invoke(app, ["stats"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith("error: unexpected RuntimeError: boom (a bug in hrag-pg; set HRAG_DEBUG=1")


def test_error_lines_are_not_wrapped_and_do_not_repeat_the_path(env: dict[str, str], tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-directory-name-" * 3) / "bad.md"
    deep.parent.mkdir(parents=True)
    deep.write_bytes(b"\xff\xfe" + "not utf-8".encode("utf-16-le"))
    result = cli(env, "ingest", str(deep))
    assert result.returncode == 1
    failed = [line for line in result.stderr.splitlines() if line.startswith("failed")]
    assert len(failed) == 1 and len(failed[0]) > 80
    assert failed[0].count(str(deep)) == 1 and "UTF-16" in failed[0]
    assert not result.stderr.startswith("\n")


#: An option typed for another mode than the one in use: (args, what the one line must say).
OTHER_MODE_OPTIONS = [
    (("query", "x", "--mode", "auto-merge", "--max-parents", "2"),
     "--max-parents applies to --mode parent-child only, not auto-merge; "
     "drop --max-parents or pass --mode parent-child"),
    (("query", "x", "--max-tokens", "500", "--max-parents", "2"),
     "--max-parents applies to --mode parent-child only, not auto (the default mode)"),
    (("query", "x", "--merge-threshold", "0.3"),
     "--merge-threshold applies to --mode auto-merge only, not auto (the default mode)"),
    (("query", "x", "-m", "auto", "--merge-threshold", "0.3"), "--merge-threshold applies to --mode auto-merge only"),
    (("ingest", "README.md", "--window-tokens", "500"),
     "--window-tokens applies to --strategy window only, not the one chosen by file type"),
    (("ingest", "README.md", "-s", "headings", "--window-tokens", "500"),
     "--window-tokens applies to --strategy window only, not headings"),
]


@pytest.mark.parametrize(("args", "message"), OTHER_MODE_OPTIONS, ids=[" ".join(a[0]) for a in OTHER_MODE_OPTIONS])
def test_an_option_of_another_mode_is_a_usage_error_naming_the_modes_it_applies_to(
        env: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str) -> None:
    monkeypatch.chdir(REPO)
    loads = model_loads()
    result = invoke(env, *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and message in line, line
    assert model_loads() == loads


@pytest.mark.parametrize("args", [
    ("query", "x", "-m", "auto-merge"),  # --max-parents and --merge-threshold have defaults: not given, no error
    ("query", "x", "-m", "parent-child", "--max-parents", "2"),
    ("query", "x", "-m", "auto-merge", "--merge-threshold", "0.3"),
    ("query", "x", "--max-tokens", "500"),
])
def test_options_of_the_mode_in_use_and_untyped_ones_are_accepted(env: dict[str, str], args: tuple[str, ...]) -> None:
    result = invoke(env, *args, "-c", "nothere")  # gets as far as the collection (no model needed)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert "no collection 'nothere'" in result.stderr


#: Commands given --json that fail: (args, exit status, what the JSON error says).
JSON_FAILURES = [
    (("sources", "-c", "nothere"), 1, "no collection 'nothere' in this database"),
    (("query", "x", "-c", "nothere"), 1, "no collection 'nothere' in this database"),
    (("query", "x", "--top-k", "0"), 2, "--top-k must be between 1 and 1000, got 0"),
    (("show", "00000000-0000-0000-0000-000000000000"), 1, "no node"),
    (("reembed", "-c", "nothere", "--model", "minilm"), 1, "no collection 'nothere'"),
    (("eval", "nothere.jsonl"), 2, "nothere.jsonl: no such file"),
    (("ingest", "no/such/file.md"), 2, "no/such/file.md: no such file or directory"),
]


@pytest.mark.parametrize(("args", "code", "message"), JSON_FAILURES, ids=[" ".join(a[0]) for a in JSON_FAILURES])
def test_a_json_command_that_fails_prints_a_json_error_and_exits_non_zero(
        env: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], code: int, message: str) -> None:
    monkeypatch.chdir(REPO)
    result = invoke(env, *args, "--json")
    assert result.exit_code == code, (result.stdout, result.stderr)
    payload = json.loads(result.stdout)
    assert list(payload) == ["error"] and message in payload["error"]
    assert result.stderr == f"error: {payload['error']}\n"


def test_sources_json_of_an_empty_database_is_an_empty_list(env: dict[str, str]) -> None:
    result = invoke(env, "sources", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


# ------------------------------------------------------------------- 4. read-only roles


@pytest.fixture
def roles(db_url: str, stored) -> Iterator[dict[str, str]]:
    """A reader (hrag.grant_reader) and a tenant of [/x] (hrag.create_tenant_role), as login roles."""
    suffix = uuid.uuid4().hex[:8]
    names = {"reader": f"hrag_reader_{suffix}", "tenant": f"hrag_tenant_{suffix}"}
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{names["reader"]}" LOGIN')
        conn.execute("SELECT hrag.grant_reader(%s)", (names["reader"],))
        conn.execute("SELECT hrag.create_tenant_role(%s, ARRAY['[/x]'])", (names["tenant"],))
        conn.execute(f'ALTER ROLE "{names["tenant"]}" LOGIN')
    user = db_url.split("://", 1)[1].split("@", 1)[0]
    yield {kind: db_url.replace(f"{user}@", f"{name}@", 1) for kind, name in names.items()}
    db._engine_for.cache_clear()
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        for name in names.values():
            conn.execute(f'DROP OWNED BY "{name}"')
            conn.execute(f'DROP ROLE "{name}"')


@pytest.mark.parametrize("kind", ["reader", "tenant"])
def test_read_only_roles_open_a_database_at_head_and_use_show_stats_and_check(
        env: dict[str, str], db_url: str, roles: dict[str, str], kind: str) -> None:
    HRAG.open(roles[kind])  # at head: nothing to migrate, so no CREATE needed
    as_role = {**env, "HRAG_DATABASE_URL": roles[kind]}
    node = node_id_of(db_url, "Hosts")
    loads = model_loads()
    for args in (("stats",), ("show", node), ("check",)):
        result = invoke(as_role, *args)
        assert result.exit_code == 0, (args, result.output)
    assert model_loads() == loads, "show, stats or check loaded the embedding model"
    assert "[/x]" in invoke(as_role, "stats").stdout
    repair = invoke(as_role, "check", "--repair")
    assert repair.exit_code == 1 and "--repair needs write access" in repair.stderr


@pytest.mark.model
def test_a_tenant_role_can_query_its_collection(db_url: str, roles: dict[str, str]) -> None:
    # The weightless model cannot embed a question: the owner switches the collection to the bundled model.
    HRAG(db_url).reembed("[/x]", "minilm")
    result = invoke({"HRAG_DATABASE_URL": roles["tenant"]}, "query", "Which package pins versions?", "-c", "[/x]")
    assert result.exit_code == 0, result.output
    assert "[pip-tools] is a package" in result.stdout


# -------------------------------------------------------------------- 5. migrations


def test_migrate_base_needs_yes_and_says_what_it_deletes(env: dict[str, str], stored) -> None:
    refused = invoke(env, "migrate", "base")
    assert refused.exit_code == 2
    assert "deletes 1 document in 1 collection; add --yes to confirm" in refused.stderr
    assert "[/x]" in invoke(env, "stats").stdout  # nothing was removed
    removed = invoke(env, "migrate", "base", "--yes")
    assert removed.exit_code == 0 and "hrag removed" in removed.stdout


def test_migrate_names_the_revision_actually_reached(env: dict[str, str]) -> None:
    from hrag_pg.migrate import head_revision

    head = head_revision()
    down = invoke(env, "migrate", "0003", "--yes")
    assert down.exit_code == 0, down.output
    assert f"from revision {head} to 0003" in down.stdout and f"to {head}" not in down.stdout
    up = invoke(env, "migrate")
    assert up.exit_code == 0 and f"from revision 0003 to {head}" in up.stdout
    again = invoke(env, "migrate")
    assert f"already at revision {head}" in again.stdout


def test_a_command_that_upgrades_a_rolled_back_schema_says_so(env: dict[str, str]) -> None:
    from hrag_pg.migrate import head_revision, revisions

    head, previous = head_revision(), revisions()[-2]
    assert invoke(env, "migrate", previous, "--yes").exit_code == 0
    stats = invoke(env, "stats")
    assert stats.exit_code == 0, stats.output
    assert f"note: upgraded the hrag schema from revision {previous} to {head}" in stats.stderr
    assert f"already at revision {head}" in invoke(env, "migrate").stdout
    assert "upgraded" not in invoke(env, "stats").stderr  # at head: nothing to say


def test_only_a_missing_vector_extension_is_reported_as_no_pgvector() -> None:
    import psycopg.errors as pg

    from hrag_pg.errors import ConfigurationError
    from hrag_pg.migrate import translate_migration_error

    with pytest.raises(pg.FeatureNotSupported), translate_migration_error("postgresql://u@h/d"):
        raise pg.FeatureNotSupported("cannot use CONCURRENTLY here")
    with pytest.raises(ConfigurationError, match="no pgvector"), translate_migration_error("postgresql://u@h/d"):
        raise pg.FeatureNotSupported('extension "vector" is not available')


# ------------------------------------------------------------------ 6. bulk path


def test_a_second_bulk_load_fails_clearly_while_one_runs(db_url: str, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    from hrag_pg import repository
    from hrag_pg.errors import IngestError

    monkeypatch.setattr(repository, "BULK_LOCK_WAIT", "200ms")
    doc = tmp_path / "a.md"
    doc.write_text(BRACKETS_MD, encoding="utf-8")
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    with psycopg.connect(db.libpq_url(db_url)) as first:
        first.execute("SELECT pg_advisory_lock(%s)", (repository.BULK_LOCK_KEY,))
        with pytest.raises(IngestError, match="another bulk load is running"):
            hrag.ingest([doc], bulk=True)
        first.execute("SELECT pg_advisory_unlock(%s)", (repository.BULK_LOCK_KEY,))
    report = hrag.ingest([doc], bulk=True)
    assert report.results[0].status == "created"
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        analyzed = conn.execute("SELECT last_analyze FROM pg_stat_user_tables "
                                "WHERE schemaname = 'hrag' AND relname = 'nodes'").fetchone()[0]
        index = conn.execute("SELECT to_regclass('hrag.nodes_embedding_hnsw_idx')").fetchone()[0]
    assert analyzed is not None, "a bulk load must end with ANALYZE hrag.nodes"
    assert index is not None


def test_check_reports_a_missing_vector_index_and_repair_rebuilds_it(env: dict[str, str], db_url: str,
                                                                      stored) -> None:
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        conn.execute("DROP INDEX hrag.nodes_embedding_hnsw_idx")  # a bulk load that died before rebuilding it
    found = invoke(env, "check")
    assert found.exit_code == 1
    assert "vector_index_missing" in found.stdout and "1 problem" in found.stdout
    repaired = invoke(env, "check", "--repair")
    assert repaired.exit_code == 0, repaired.output
    assert "repaired vector_index: 1" in repaired.stdout and "all trees are consistent" in repaired.stdout
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        assert conn.execute("SELECT to_regclass('hrag.nodes_embedding_hnsw_idx')").fetchone()[0] is not None


# --------------------------------------------------------------- 8. large input


def test_a_file_with_a_huge_line_is_refused_naming_file_line_and_limit(tmp_path: Path, db_url: str) -> None:
    from hrag_pg.ingest.loaders import MAX_LINE_CHARS

    doc = tmp_path / "minified.md"
    doc.write_text("# T\n\n" + "word " * (MAX_LINE_CHARS // 5 + 10) + "\n", encoding="utf-8")
    report = HRAG(db_url, embedder=HashingEmbedder()).ingest([doc])
    (path, why), = report.failed
    assert path == str(doc) and f"line 3 is {MAX_LINE_CHARS + 50:,} characters long" in why
    assert f"the limit is {MAX_LINE_CHARS:,} characters per line" in why


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path, db_url: str) -> None:
    from hrag_pg.ingest.loaders import MAX_FILE_BYTES

    doc = tmp_path / "huge.md"
    with doc.open("wb") as handle:  # sparse: nothing is written, the size is what matters
        handle.truncate(MAX_FILE_BYTES + 1)
    report = HRAG(db_url, embedder=HashingEmbedder()).ingest([doc])
    (_, why), = report.failed
    assert f"the file is {MAX_FILE_BYTES + 1:,} bytes; the limit is {MAX_FILE_BYTES:,} bytes per file" in why


# ------------------------------------------------------------ 9. limits and skipping


def test_an_empty_init_py_in_a_package_is_skipped_not_failed(tmp_path: Path, db_url: str) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("def f():\n    return 1\n")
    report = HRAG(db_url, embedder=HashingEmbedder()).ingest([package])
    assert not report.failed
    assert [Path(p).name for p, _ in report.skipped] == ["__init__.py"]
    assert [Path(r.source).name for r in report.results] == ["mod.py"]


def test_a_directory_with_no_file_to_read_is_an_error_naming_what_was_skipped(
        env: dict[str, str], tmp_path: Path) -> None:
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "build.sh").write_text("make all\n")
    (scripts / "config.toml").write_text("[tool]\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    loads = model_loads()
    result = invoke(env, "ingest", str(scripts))
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(
        f"error: {scripts}: no files to ingest, 2 skipped ({scripts / 'build.sh'}: unsupported file type "
        f"'.sh'; {scripts / 'config.toml'}: unsupported file type '.toml'); read by default: "), line
    assert ".md" in line and "README" in line
    result = invoke(env, "ingest", str(empty), "--json")
    assert result.exit_code == 2 and "no files to ingest (the directory is empty" in result.stderr
    assert model_loads() == loads, "a walk that found nothing loaded the embedding model"


def test_python_limits_name_the_argument_given_not_a_derived_one(db_url: str, stored) -> None:
    from hrag_pg.errors import InvalidArgument
    from hrag_pg.settings import AutoMergeSettings, ParentChildSettings

    hrag, _ = stored
    question = "pinning packages"
    # 3 x 400 candidates stay within 1..1000
    assert hrag.parent_child(question, ParentChildSettings(top_k_children=400, lexical_weight=0.3))
    with pytest.raises(InvalidArgument, match=r'^top_k_children must be between 1 and 1000, got 1200'):
        hrag.parent_child(question, ParentChildSettings(top_k_children=1200, lexical_weight=0.3))
    with pytest.raises(InvalidArgument, match=r'^top_k must be between 1 and 1000, got 0'):
        hrag.auto_merge(question, AutoMergeSettings(top_k=0, lexical_weight=0.3))


@pytest.mark.model
def test_ctrl_c_during_ingest_exits_130_with_one_line(tmp_path: Path, db_url: str) -> None:
    import signal
    import time

    # enough work (about 600 texts) that the ingestion is still running when the signal comes:
    # 60 documents could be done in under 8 s on an idle machine
    for i in range(300):
        (tmp_path / f"doc{i:04}.md").write_text(f"# Doc {i}\n\n" + f"A paragraph about pelican {i}. " * 40 + "\n")
    env = {**os.environ, "HRAG_DATABASE_URL": db_url, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    # A foreground command in a terminal gets Ctrl-C with SIGINT at its default disposition; a test run
    # started in the background (`cmd &` in a script) inherits SIGINT *ignored*, and Python then never
    # raises KeyboardInterrupt. Restore the default so the test sees what a user's terminal gives.
    process = subprocess.Popen([sys.executable, "-m", "hrag_pg", "ingest", str(tmp_path), "-c", "big"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(8)  # imports done, model loading or documents being written
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 130, stderr
    last = stderr.strip().splitlines()[-1]
    # (what was written and what not, once the command runs; "interrupted" alone if the imports were still going)
    assert "Traceback" not in stderr and (last == "error: interrupted" or last.startswith("error: interrupted: "))


@pytest.mark.parametrize("where", ["a string exec", "plain code"])
def test_ctrl_c_inside_a_string_exec_under_python_m_still_exits_130(tmp_path: Path, where: str) -> None:
    # Ctrl-C during a lazy import often lands in a dataclass's exec'd method source (torch's, as the
    # model loads); CPython then marks the interrupt unhandled even though the CLI caught it, and
    # `python -m` killed itself with SIGINT (exit -2) after printing "error: interrupted".
    raise_it = 'exec("raise KeyboardInterrupt", {})' if where == "a string exec" else "raise KeyboardInterrupt"
    (tmp_path / "interrupted_cli.py").write_text(
        "from hrag_pg import cli\n\n\n"
        "@cli.app.command('boom')\n"
        "@cli.clear_errors\n"
        "def boom() -> None:\n"
        f"    {raise_it}\n\n\n"
        "if __name__ == '__main__':\n"
        "    cli.main()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "interrupted_cli", "boom"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert (done.returncode, done.stderr) == (130, "error: interrupted\n")


# --------------------------------------------------- 11. ingest as it goes, and stopped


@pytest.fixture
def three_stored(db_url: str, weightless_model: Path, tmp_path: Path) -> list[Path]:
    """Three files stored in collection ``ops`` (re-ingesting them needs no model: they are unchanged)."""
    folder = tmp_path / "three"
    folder.mkdir()
    files = []
    for i, word in enumerate(["pelicans", "herons", "storks"], start=1):
        files.append(folder / f"{i}-{word}.md")
        files[-1].write_text(f"# {word.title()}\n\n## Habitat\n\nWhere {word} live.\n", encoding="utf-8")
    report = HRAG(db_url, embedder=TokenizerEmbedder(weightless_model)).ingest(files, collection="ops")
    assert not report.failed and len(report.results) == 3
    return files


@contextmanager
def source_locked(db_url: str, collection: str, source: str) -> Iterator[None]:
    """Hold the lock every write of ``source`` takes first: an ingest reaching that file waits there."""
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        key = f"hrag\x1f{collection}\x1f{source}"
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))


def start_cli(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """The real `hrag` in its own process, stdout and stderr pipes; Ctrl-C at its default (as in a terminal)."""
    full = {**os.environ, **env, "PYTHONPATH": str(REPO), "COLUMNS": "80"}
    return subprocess.Popen([sys.executable, "-m", "hrag_pg", *args], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def first_line(proc: subprocess.Popen[str], timeout: float = 120) -> str:
    """The first line ``hrag ingest`` prints about a file (after the line that says which model writes), or ""
    if none comes within ``timeout``."""
    import threading

    assert proc.stdout is not None
    stdout, found = proc.stdout, []

    def read() -> None:
        while line := stdout.readline():
            if not line.startswith("model "):
                found.append(line)
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    return found[0] if found else ""


def finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_ingest_prints_each_file_as_it_finishes_when_stdout_is_a_pipe(
        env: dict[str, str], db_url: str, three_stored: list[Path]) -> None:
    with source_locked(db_url, "ops", three_stored[1].name):
        proc = start_cli(env, "ingest", *map(str, three_stored), "-c", "ops")
        try:
            line = first_line(proc)  # printed while the second file waits for its lock
            assert proc.poll() is None
        except BaseException:
            finish(proc)
            raise
    assert line.startswith("unchanged 1-pelicans.md "), (line, finish(proc))
    stdout, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    assert [row.split()[:2] for row in stdout.splitlines()[:2]] == [["unchanged", "2-herons.md"],
                                                                  ["unchanged", "3-storks.md"]]


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_ctrl_c_during_ingest_says_how_many_documents_were_written_and_how_many_not_started(
        env: dict[str, str], db_url: str, three_stored: list[Path], as_json: bool) -> None:
    with source_locked(db_url, "ops", three_stored[1].name):
        proc = start_cli(env, "ingest", *map(str, three_stored), "-c", "ops", "--force",
                         *(["--json"] if as_json else []))
        try:
            if not as_json:
                assert first_line(proc).startswith("updated   1-pelicans.md ")
            wait_for_lock_waiter(db_url)  # the ingest is at the second file
            proc.send_signal(signal.SIGINT)
            stdout, stderr = finish(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == (
        f"error: interrupted: 1 document written (kept), {three_stored[1]} not written, 1 file not started; "
        "run the same command again to ingest the rest")
    if as_json:
        payload = json.loads(stdout)
        assert [r["source"] for r in payload["results"]] == ["1-pelicans.md"]
        assert payload["interrupted"] == {"not_written": str(three_stored[1]), "not_started": 1,
                                          "vector_index_missing": False}
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        assert conn.execute("SELECT count(*) FROM hrag.documents WHERE collection = 'ops'").fetchone()[0] == 3


def wait_for_lock_waiter(db_url: str, timeout: float = 120, locktype: str = "advisory") -> None:
    """Until some session waits for a lock of ``locktype`` (an advisory one: the ingest reached the locked file)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(db.libpq_url(db_url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            if conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = %s AND NOT granted",
                            (locktype,)).fetchone()[0]:
                return
            time.sleep(0.1)
    raise AssertionError(f"nobody waited for a {locktype} lock")


def test_ctrl_c_that_stops_the_index_rebuild_of_a_bulk_ingest_says_the_index_is_missing_and_how_to_build_it(
        env: dict[str, str], db_url: str, three_stored: list[Path]) -> None:
    with source_locked(db_url, "ops", three_stored[1].name), \
            psycopg.connect(db.libpq_url(db_url)) as writer:
        proc = start_cli(env, "ingest", *map(str, three_stored), "-c", "ops", "--force", "--bulk")
        try:
            wait_for_lock_waiter(db_url)  # the index is dropped and the ingest is at the second file
            # a writer in an open transaction: the rebuild (CREATE INDEX) has to wait for it
            writer.execute("LOCK TABLE hrag.nodes IN ROW EXCLUSIVE MODE")
            proc.send_signal(signal.SIGINT)
            wait_for_lock_waiter(db_url, locktype="relation")  # the rebuild waits
            proc.send_signal(signal.SIGINT)  # a second Ctrl-C: an impatient operator stops the rebuild too
            _, stderr = finish(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        writer.rollback()
    assert proc.returncode == 130, stderr
    assert stderr.splitlines()[-1].endswith(
        "; the vector index was not rebuilt (searches scan every row): `hrag check --repair` "
        "or the next `hrag ingest --bulk` builds it"), stderr
    assert "1 document written (kept)" in stderr
    with psycopg.connect(db.libpq_url(db_url)) as conn:
        assert conn.execute("SELECT hrag._vector_index_state()").fetchone()[0] == "missing"


def test_ingest_totals_count_the_failed_files_and_failures_name_the_cli_option(
        env: dict[str, str], three_stored: list[Path]) -> None:
    bad = three_stored[0].parent / "4-latin1.md"
    bad.write_bytes("# Caf\xe9\n\nno UTF-8 here\n".encode("latin-1"))
    result = invoke(env, "ingest", str(three_stored[0]), str(bad), "-c", "ops")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[-1].endswith("; 1 file failed"), result.stdout
    assert "1 document, " in result.stdout
    (failed,) = [line for line in result.stderr.splitlines() if line.startswith("failed")]
    assert failed.endswith("convert the file to UTF-8 or ingest it with --errors replace"), failed
    as_json = json.loads(invoke(env, "ingest", str(bad), str(three_stored[0]), "-c", "ops", "--json").stdout)
    assert as_json["failed"][0]["error"].endswith("ingest it with --errors replace")


# ----------------------------------------------------------------------- 10. help


@pytest.mark.parametrize("command", [
    (), ("db",), ("db", "start"), ("db", "stop"), ("db", "status"), ("db", "url"), ("migrate",), ("ingest",),
    ("query",), ("show",), ("delete",), ("stats",), ("check",), ("eval",), ("demo",),
])
def test_every_command_has_short_help_with_an_example_and_no_type_tags(command: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*command, "-h"])
    assert result.exit_code == 0, result.output
    assert "Examples:" in result.stdout
    assert "<bool>" not in result.stdout and "<int>" not in result.stdout and "<str>" not in result.stdout


def test_db_url_of_a_server_that_is_not_running_exits_3(tmp_path: Path) -> None:
    result = runner.invoke(app, ["db", "url"], env={"HRAG_DATA_DIR": str(tmp_path / "fresh"), "HRAG_DATABASE_URL": ""})
    assert result.exit_code == 3 and result.stderr.startswith("error: the embedded PostgreSQL in ")


def test_version_and_eval_question_format() -> None:
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.stdout.startswith("hrag-pg ")
    help_text = runner.invoke(app, ["eval", "-h"]).stdout
    assert '"evidence": ["verbatim snippet"' in help_text and "evidence: }" not in help_text
    assert "kind is narrow" in help_text
