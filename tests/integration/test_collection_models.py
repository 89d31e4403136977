"""Every collection knows its embedding model: recorded, enforced, and switched in place by ``reembed``.

Vectors of two models are not comparable, so a write or a question with
another model than the collection's is refused with one line naming both
models and the fix; ``HRAG.reembed`` switches a collection to another model
so that readers see one model or the other, never both, and a run killed
half-way resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hrag_pg.api import HRAG, model_key
from hrag_pg.embedding import E5_Q4, MINILM, identity_of
from hrag_pg.errors import HragError, ModelMismatchError
from hrag_pg.ingest.pipeline import IngestOptions, prepare_file
from tests.embedders import HashingEmbedder, SaltedHashingEmbedder
from tests.stored_rows import DOCS, assert_rows_equal, expected_rows, node_rows, recorded_model

REPO = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------- recording and refusing


def test_the_first_write_records_the_collections_model(stored: HRAG, sql: psycopg.Connection) -> None:
    assert recorded_model(sql) == ("hashing-test", 384, "", "", "", None)
    assert stored.collection_models()["c"] == identity_of(HashingEmbedder())


def test_an_ingest_with_another_model_is_refused_naming_both_models_and_the_fix(
        stored: HRAG, db_url: str, sql: psycopg.Connection, tmp_path: Path) -> None:
    before = node_rows(sql)
    edited = tmp_path / "guide.md"
    edited.write_text(DOCS[0].read_text(encoding="utf-8") + "\n\nA new paragraph.\n", encoding="utf-8")
    other = HRAG(db_url, embedder=SaltedHashingEmbedder())
    for call in (lambda: other.ingest([edited], collection="c", stop_on_error=True, replace=True),
                 lambda: other.ingest_text("# New\n\nText.", source="new.md", collection="c")):
        with pytest.raises(ModelMismatchError) as raised:
            call()
        message = str(raised.value)
        assert "'c'" in message and "hashing-test" in message and "hashing-salted" in message
        assert "hrag reembed -c c --model hashing-salted" in message
    with pytest.raises(ModelMismatchError):  # refused once, before any file is read
        other.ingest([edited], collection="c", replace=True)
    # The write itself checks too, in its transaction (a writer that chose its model before a switch).
    salted = SaltedHashingEmbedder()
    doc = prepare_file(edited, IngestOptions(), collection="c", model_name=model_key(salted),
                       counter=salted.token_counter)
    with pytest.raises(ModelMismatchError, match=r"hashing-test.*hashing-salted"):
        other.repository.write_document(doc, salted)
    assert node_rows(sql) == before  # nothing written


def test_a_question_with_another_model_is_refused_in_every_mode_and_in_the_adapters(
        stored: HRAG, db_url: str) -> None:
    from hrag_pg.integrations.langchain import HRAGRetriever as LangChainRetriever
    from hrag_pg.integrations.llama_index import HRAGRetriever as LlamaIndexRetriever

    other = HRAG(db_url, embedder=SaltedHashingEmbedder())
    calls = [lambda: other.parent_child("試用期間", collection="c"),
             lambda: other.auto_merge("試用期間", collection="c"),
             lambda: other.retrieve("試用期間", collection="c"),
             lambda: other.parent_child("試用期間"),  # every collection: c is among them
             lambda: LangChainRetriever(hrag=other, collection="c").invoke("試用期間"),
             lambda: LlamaIndexRetriever(other, collection="c").retrieve("試用期間")]
    for call in calls:
        with pytest.raises(ModelMismatchError, match=r"hashing-test.*hashing-salted"):
            call()
    assert stored.parent_child("試用期間", collection="c")  # the collection's own model still reads it


def test_one_embedder_for_collections_of_different_models_is_refused_naming_them(db_url: str) -> None:
    """There is no one embedder for both (a retrieval embeds such a question once per model:
    tests/acceptance/test_several_models.py)."""
    HRAG(db_url, embedder=HashingEmbedder()).ingest([DOCS[0]], collection="plain")
    HRAG(db_url, embedder=SaltedHashingEmbedder()).ingest([DOCS[0]], collection="salted")
    with pytest.raises(ModelMismatchError, match=r"'plain' .hashing-test., 'salted' .hashing-salted.*--collection"):
        HRAG(db_url).query_embedder(None)


def test_a_new_collection_gets_its_model_from_the_script_of_its_documents_and_keeps_it(
        db_url: str, sql: psycopg.Connection) -> None:
    hrag = HRAG(db_url)
    hrag.ingest([DOCS[1]], collection="ja")
    hrag.ingest([DOCS[0]], collection="en")
    assert recorded_model(sql, "ja")[:1] == (E5_Q4,)
    assert recorded_model(sql, "ja")[3:5] == ("query: ", "passage: ")
    assert recorded_model(sql, "en")[:1] == (MINILM,)
    # An English document added to the Japanese collection is embedded with the collection's model.
    hrag.ingest([DOCS[0]], collection="ja")
    assert recorded_model(sql, "ja")[:1] == (E5_Q4,)
    assert type(hrag.query_embedder("ja")).__name__ == "E5Q4Embedder"
    assert type(hrag.query_embedder("en")).__name__ == "MiniLMEmbedder"
    # The seed's question finds item 3 with the defaults: query: / passage: prompts on both sides.
    [first, *_] = hrag.parent_child("試用期間中の2ヶ月間、通勤手当と昼食手当は支給されますか？", collection="ja")
    assert "試用期間中の従業員については" in first.content


# --------------------------------------------------------------------------- reembed


def test_reembed_leaves_exactly_what_a_fresh_ingest_with_the_new_model_would(
        stored: HRAG, db_url: str, sql: psycopg.Connection) -> None:
    salted = SaltedHashingEmbedder()
    expected: dict[Any, tuple[Any, ...]] = {}
    for path in DOCS:
        expected.update(expected_rows(path, salted))
    old = node_rows(sql)
    assert any(old[i][1] != expected[i][1] for i in expected)  # token counts follow the model

    report = stored.reembed("c", salted)
    assert (report.status, report.documents, report.prepared, report.resumed) == ("switched", 3, 3, 0)
    assert report.switched == len(expected)
    assert_rows_equal(node_rows(sql), expected)
    assert recorded_model(sql)[0] == "hashing-salted" and recorded_model(sql)[5] is None
    assert sql.execute("SELECT count(*) FROM hrag.reembed_documents").fetchone()[0] == 0
    assert sql.execute("SELECT count(*) FROM hrag.check_integrity()").fetchone()[0] == 0
    # A document's total follows its root, and re-ingesting with the new model re-embeds nothing.
    assert sql.execute("SELECT count(*) FROM hrag.documents d JOIN hrag.nodes n ON n.document_id = d.id "
                       "AND n.parent_id IS NULL WHERE d.total_tokens <> n.subtree_tokens").fetchone()[0] == 0
    after = HRAG(db_url, embedder=SaltedHashingEmbedder()).ingest(DOCS, collection="c")
    assert {r.status for r in after.results} == {"unchanged"} and after.embedded == 0
    # The old model is refused now; the new one reads.
    with pytest.raises(ModelMismatchError):
        HRAG(db_url, embedder=HashingEmbedder()).retrieve("試用期間", collection="c")
    assert HRAG(db_url, embedder=SaltedHashingEmbedder()).retrieve("試用期間", collection="c")
    assert stored.reembed("c", SaltedHashingEmbedder()).status == "unchanged"


class ThirdModel(HashingEmbedder):
    model_name = "hashing-third"


KILLER = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {repo!r})
    from hrag_pg.api import HRAG
    from tests.embedders import SaltedHashingEmbedder

    class DiesOnItsThirdDocument(SaltedHashingEmbedder):
        def embed(self, texts):
            if self.calls == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            return super().embed(texts)

    HRAG({url!r}).reembed("c", DiesOnItsThirdDocument())
""")


def test_a_reembed_killed_half_way_leaves_every_document_whole_and_resumes(
        stored: HRAG, db_url: str, sql: psycopg.Connection) -> None:
    before = node_rows(sql)
    run = subprocess.run([sys.executable, "-c", KILLER.format(repo=str(REPO), url=db_url)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == -signal.SIGKILL, run.stderr
    # Two documents were prepared and committed; nothing a reader sees changed.
    assert sql.execute("SELECT count(*) FROM hrag.reembed_documents").fetchone()[0] == 2
    assert node_rows(sql) == before
    assert recorded_model(sql)[0] == "hashing-test" and recorded_model(sql)[5]["model"] == "hashing-salted"
    assert stored.retrieve("試用期間", collection="c")
    # Another model cannot start over it; the same one resumes with the third document.
    with pytest.raises(HragError, match="unfinished reembed of collection 'c' to hashing-salted"):
        stored.reembed("c", ThirdModel())
    salted = SaltedHashingEmbedder()
    report = stored.reembed("c", salted)
    assert (report.prepared, report.resumed, report.embedded) == (1, 2, len(salted.texts))
    expected: dict[Any, tuple[Any, ...]] = {}
    for path in DOCS:
        expected.update(expected_rows(path, SaltedHashingEmbedder()))
    assert_rows_equal(node_rows(sql), expected)


def test_a_document_written_during_a_reembed_is_prepared_again_before_the_switch(
        stored: HRAG, db_url: str, sql: psycopg.Connection, tmp_path: Path) -> None:
    edited = tmp_path / "guide.md"
    edited.write_text(DOCS[0].read_text(encoding="utf-8").replace("\n\n", "\n\nEdited. ", 1), encoding="utf-8")
    writer = HRAG(db_url, embedder=HashingEmbedder())

    def progress(stage: str, done: int, total: int) -> None:
        if done == total and not writer.sources("c")[0].metadata.get("edited"):
            # the old model's writer, after every document was prepared and before the switch
            report = writer.ingest([edited], collection="c", source="guide.md", metadata={"edited": True},
                                   replace=True)
            assert report.results[0].status == "updated"

    stored.reembed("c", SaltedHashingEmbedder(), progress=progress)
    expected: dict[Any, tuple[Any, ...]] = {}
    for path in (edited, *DOCS[1:]):
        expected.update(expected_rows(path, SaltedHashingEmbedder()))
    assert_rows_equal(node_rows(sql), expected)


def test_an_unfinished_reembed_can_be_cancelled(stored: HRAG, db_url: str, sql: psycopg.Connection) -> None:
    run = subprocess.run([sys.executable, "-c", KILLER.format(repo=str(REPO), url=db_url)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == -signal.SIGKILL
    assert stored.cancel_reembed("c") is True
    assert recorded_model(sql)[5] is None
    assert sql.execute("SELECT count(*) FROM hrag.reembed_nodes").fetchone()[0] == 0
    assert stored.cancel_reembed("c") is False


def test_reembed_of_an_unknown_collection_is_refused(stored: HRAG) -> None:
    with pytest.raises(HragError, match="no collection 'missing'"):
        stored.reembed("missing", SaltedHashingEmbedder())


def test_the_cli_commands_that_embed_nothing_never_import_torch_nor_does_a_question_to_minilm_or_e5(
        db_url: str) -> None:
    HRAG(db_url, embedder=HashingEmbedder()).ingest([DOCS[0]], collection="c")
    HRAG(db_url).ingest([DOCS[0]], collection="en")  # MiniLM, by the script
    HRAG(db_url).ingest([DOCS[1]], collection="ja")  # the multilingual model
    probe = textwrap.dedent("""
        import sys
        from hrag_pg.cli import main
        sys.argv = ["hrag", *sys.argv[1:]]
        try:
            main()
        except SystemExit as done:
            print("exit status:", done.code, file=sys.stderr)
        print("torch imported:", any(m == "torch" or m.startswith("torch.") for m in sys.modules), file=sys.stderr)
        print("alembic imported:", "alembic" in sys.modules, file=sys.stderr)
    """)
    env = {**os.environ, "HRAG_DATABASE_URL": db_url, "PYTHONPATH": str(REPO)}
    for command in (["sources"], ["check"], ["stats"], ["sources", "--json"],
                    ["query", "How do I install it?", "-c", "en", "--max-tokens", "500"],
                    ["query", "試用期間中の昼食手当は？", "-c", "ja"]):
        run = subprocess.run([sys.executable, "-c", probe, *command], env=env, capture_output=True, text=True,
                             timeout=120, check=False)
        # (the command did its work: one that failed at start would prove nothing of what it imports)
        assert "exit status: 0" in run.stderr and run.stdout.strip(), (command, run.stderr)
        assert "torch imported: False" in run.stderr, (command, run.stderr)
        # (nor Alembic, at head: most of a second of every command's start)
        assert "alembic imported: False" in run.stderr, (command, run.stderr)


def test_the_cli_shows_each_collections_model_switches_it_and_refuses_bad_input(db_url: str) -> None:
    from typer.testing import CliRunner

    from hrag_pg.cli import app

    HRAG(db_url).ingest([DOCS[0]], collection="en")
    env = {"HRAG_DATABASE_URL": db_url}
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args), env=env)

    sources = json.loads(run("sources", "--json").stdout)
    assert {(r["collection"], r["model"]["model"]) for r in sources} == {("en", MINILM)}
    assert [r["model"]["model"] for r in json.loads(run("stats", "--json").stdout)["collections"]] == [MINILM]
    assert "collection en: model all-MiniLM-L6-v2 (384 dimensions" in run("sources").stdout
    refused = run("query", "How do I install it?", "-c", "en", "--model", "e5")
    assert refused.exit_code == 1 and "hrag reembed -c en --model multilingual-e5-small-q4" in refused.output
    for args, message in ((("reembed", "-c", "en"), "give --model NAME to switch, or --cancel"),
                          (("reembed", "-c", "en", "--model", "e5", "--cancel"), "give --model NAME"),
                          (("reembed", "-c", "nowhere", "--model", "e5"), "no collection 'nowhere'"),
                          (("ingest", str(DOCS[0]), "--model", " "), "--model must not be empty")):
        result = run(*args)
        assert result.exit_code in (1, 2) and message in result.output, (args, result.output)
    switched = run("reembed", "-c", "en", "--model", "e5", "--json")
    assert switched.exit_code == 0, switched.output
    report = json.loads(switched.stdout)
    assert (report["status"], report["previous_model"], report["model"]) == ("switched", MINILM, E5_Q4)
    assert run("query", "How do I install it?", "-c", "en", "--json").exit_code == 0
    again = run("reembed", "-c", "en", "--model", "multilingual")
    assert "already embedded with multilingual-e5-small-q4" in again.stdout


def test_reembed_counts_the_tokens_of_separators_that_hold_text_as_a_fresh_ingest_does(
        db_url: str, sql: psycopg.Connection, tmp_path: Path) -> None:
    doc = tmp_path / "links.md"
    doc.write_text("# Links\n\n## Setup\n\nRead the [guide][g] first, then the [notes][n].\n\n"
                   "[g]: https://example.org/guide\n[n]: https://example.org/notes\n\n"
                   "Then install it with the usual steps and check the log for warnings.\n\n"
                   "## Use\n\nRun it daily.\n", encoding="utf-8")
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest([doc], collection="c")
    assert sql.execute("SELECT count(*) FROM hrag.nodes WHERE btrim(separator, E' \\n') <> ''").fetchone()[0] > 0
    hrag.reembed("c", SaltedHashingEmbedder())
    assert_rows_equal(node_rows(sql), expected_rows(doc, SaltedHashingEmbedder()))
