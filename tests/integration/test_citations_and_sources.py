"""Citations (every result names its source and document metadata) and stable, listable document identity."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import psycopg
import pytest
from rich.console import Console
from typer.testing import CliRunner

from hrag_pg import cli
from hrag_pg.api import HRAG
from hrag_pg.ingest.loaders import load_document
from hrag_pg.settings import AutoMergeSettings, ParentChildSettings
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUESTION = "試用期間中の通勤手当と昼食手当は支給されますか"
runner = CliRunner()


class FirstWordsReranker:
    """Deterministic reranker: longer texts first (the point is the second round trip)."""

    def score(self, query: str, texts: list[str]) -> list[float]:
        return [float(len(t)) for t in texts]


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    h = HRAG(db_url, embedder=HashingEmbedder())
    h.ingest([FIXTURES / "work_rules_ja.md"], metadata={"lang": "ja", "owner": "hr"})
    h.ingest([FIXTURES / "guide.md"], collection="guide")
    return h


@pytest.mark.parametrize("mode", [ParentChildSettings, AutoMergeSettings])
@pytest.mark.parametrize("reranker", [None, FirstWordsReranker()])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.3])
def test_every_result_names_its_source_and_carries_the_documents_metadata(
        hrag: HRAG, mode: type, reranker: object, lexical_weight: float) -> None:
    results = hrag.retriever(mode(reranker=reranker, lexical_weight=lexical_weight, collection="default")).retrieve(
        QUESTION)
    assert results
    for r in results:
        assert r.source == "work_rules_ja.md"
        assert r.document_metadata["lang"] == "ja" and r.document_metadata["owner"] == "hr"


def test_context_results_keep_their_citations(hrag: HRAG) -> None:
    context = hrag.context(QUESTION, ParentChildSettings(max_tokens=1500), collection="default")
    assert context.results and all(r.source == "work_rules_ja.md" for r in context.results + context.dropped)


def test_json_and_human_output_show_the_source_and_the_whole_heading_path(
        hrag: HRAG, monkeypatch: pytest.MonkeyPatch) -> None:
    results = hrag.parent_child(QUESTION, ParentChildSettings(max_parents=2))
    payload = results[0].model_dump(mode="json")  # (what `hrag query --json` prints for it)
    assert payload["source"] == "work_rules_ja.md" and payload["document_metadata"]["lang"] == "ja"
    json.dumps(payload)
    long_path = results[0].model_copy(update={"heading_path": ["就業規則", "第4章 賃金と手当の細目について定める章",
                                                               "第4条：諸手当および福利厚生"]})
    out = io.StringIO()
    monkeypatch.setattr(cli.output, "console", Console(file=out, width=40, color_system=None))
    cli.output.print_results([long_path])
    text = out.getvalue()
    assert "work_rules_ja.md" in text
    assert "第4条：諸手当および福利厚生" in text, "the last heading (where the passage is) is not cut"


def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    return {"HRAG_DATABASE_URL": db_url, "HRAG_DATA_DIR": str(tmp_path / "unused")}


def test_sources_lists_source_collection_nodes_and_update_time(hrag: HRAG, db_url: str, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["sources", "--json"], env=env(db_url, tmp_path))
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["source"], r["collection"]) for r in rows] == [("work_rules_ja.md", "default"), ("guide.md", "guide")]
    assert all(r["nodes"] > 1 and r["updated_at"] for r in rows)
    assert rows[0]["metadata"]["owner"] == "hr"
    only = runner.invoke(cli.app, ["sources", "-c", "guide"], env=env(db_url, tmp_path))
    assert "guide.md" in only.output and "work_rules_ja.md" not in only.output
    unknown = runner.invoke(cli.app, ["sources", "-c", "guides"], env=env(db_url, tmp_path))
    assert unknown.exit_code == 1
    assert "no collection 'guides' in this database; collections: default, guide" in unknown.output


LONG_SOURCE = "a-rather-long-directory-name-for-the-listing/TRANSIENT-SETTINGS.md"
LONG_COLLECTION = "a-collection-with-a-rather-long-name"


def test_sources_and_stats_show_long_names_whole_so_they_can_be_copied_into_the_next_command(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    HRAG(db_url, embedder=HashingEmbedder()).ingest([FIXTURES / "guide.md"], collection=LONG_COLLECTION,
                                                    source=LONG_SOURCE)
    # a narrow terminal: a table fitted to it cut both names ("TRANSIENT-SETTINGS.m…")
    monkeypatch.setattr(cli.output, "console", Console(width=40, markup=False, highlight=False, soft_wrap=True))
    listed = runner.invoke(cli.app, ["sources"], env=env(db_url, tmp_path))
    assert listed.exit_code == 0, listed.output
    assert "…" not in listed.stdout
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith("a-rather")]
    shown_source, shown_collection = row.split()[:2]
    assert (shown_source, shown_collection) == (LONG_SOURCE, LONG_COLLECTION)
    stats = runner.invoke(cli.app, ["stats"], env=env(db_url, tmp_path))
    assert stats.exit_code == 0 and "…" not in stats.stdout
    assert any(line.split()[:1] == [LONG_COLLECTION] for line in stats.stdout.splitlines()), stats.stdout
    deleted = runner.invoke(cli.app, ["delete", shown_source, "-c", shown_collection], env=env(db_url, tmp_path))
    assert deleted.exit_code == 0, deleted.output


def test_delete_says_which_collection_holds_a_source_it_did_not_find(
        hrag: HRAG, db_url: str, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["delete", "guide.md"], env=env(db_url, tmp_path))
    assert result.exit_code == 1
    assert "no source 'guide.md' in collection 'default'" in result.output
    assert "stored in collection 'guide'" in result.output
    assert hrag.sources("guide"), "nothing was deleted"


def test_bad_metadata_json_on_the_command_line_is_one_clear_line(db_url: str, tmp_path: Path) -> None:
    result = runner.invoke(cli.app, ["ingest", str(FIXTURES / "guide.md"), "--metadata", "[1, 2]"],
                           env=env(db_url, tmp_path))
    assert result.exit_code == 2 and "--metadata must be a JSON object" in result.output


def root_texts(hrag: HRAG, sql: psycopg.Connection) -> dict[str, str | None]:
    roots = sql.execute("SELECT d.source, n.id FROM hrag.nodes n JOIN hrag.documents d "
                        "ON d.id = n.document_id WHERE n.parent_id IS NULL").fetchall()
    return {source: hrag.node_text(root) for source, root in roots}


def test_documents_ingested_under_the_old_path_naming_are_renamed_without_reembedding(
        db_url: str, postgresql: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    (docs / "hr").mkdir(parents=True)
    shutil.copy(FIXTURES / "guide.md", docs / "guide.md")
    shutil.copy(FIXTURES / "work_rules_ja.md", docs / "hr" / "rules.md")
    embedder = HashingEmbedder()
    hrag = HRAG(db_url, embedder=embedder)
    monkeypatch.chdir(tmp_path)
    # Yesterday's naming: the path as typed ("docs/guide.md"), one of them with user metadata.
    for path, meta in (("docs/guide.md", {"team": "docs"}), ("docs/hr/rules.md", {})):
        tree = load_document(Path(path), source=path)
        tree.metadata.update(meta)
        hrag.ingest_tree(tree)
    before = root_texts(hrag, postgresql)
    texts_embedded = len(embedder.texts)

    plan = hrag.rename_from_paths([docs], dry_run=True)
    assert {(p.old, p.new, p.status) for p in plan} == {("docs/guide.md", "guide.md", "planned"),
                                                        ("docs/hr/rules.md", "hr/rules.md", "planned")}
    assert {s.source for s in hrag.sources()} == {"docs/guide.md", "docs/hr/rules.md"}, "a dry run changes nothing"

    done = hrag.rename_from_paths([docs])
    assert {p.status for p in done} == {"renamed"} and sum(p.embedded for p in done) == 0
    assert len(embedder.texts) == texts_embedded, "renaming re-embeds nothing"
    stored = {s.source: s for s in hrag.sources()}
    assert set(stored) == {"guide.md", "hr/rules.md"}
    assert stored["guide.md"].metadata["team"] == "docs"
    after = root_texts(hrag, postgresql)
    assert after == {"guide.md": before["docs/guide.md"], "hr/rules.md": before["docs/hr/rules.md"]}
    # Today's ingest of the same directory, from anywhere, finds them unchanged.
    monkeypatch.chdir(docs / "hr")
    report = hrag.ingest([docs / "hr"], source="hr")
    assert [r.status for r in report.results] == ["unchanged"]
    assert hrag.rename_from_paths([docs])[0].status == "no old-named document"


def two_copyright_files(tmp_path: Path) -> tuple[Path, Path]:
    """Two package doc folders with a same-named file, as /usr/share/doc has."""
    first, second = tmp_path / "zstd", tmp_path / "jansson"
    for folder, text in ((first, "# zstd\n\nzstd is licensed under the BSD license.\n"),
                         (second, "# jansson\n\njansson is licensed under the MIT license.\n")):
        folder.mkdir()
        (folder / "copyright.md").write_text(text, encoding="utf-8")
    return first, second


def test_a_file_does_not_silently_replace_a_same_named_document_read_from_another_file(
        db_url: str, postgresql: psycopg.Connection, tmp_path: Path) -> None:
    first, second = two_copyright_files(tmp_path)
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest([first])
    report = hrag.ingest([second])
    assert not report.results
    [(path, error)] = report.failed
    assert path == str(second / "copyright.md")
    assert str(first / "copyright.md") in error and "--source" in error and "--replace" in error
    [stored] = hrag.sources()
    assert stored.metadata["file_path"] == str((first / "copyright.md").resolve())
    assert "BSD" in (root_texts(hrag, postgresql)["copyright.md"] or ""), "the stored document is the first file"


def test_replace_lets_another_file_replace_the_document_and_a_moved_file_just_updates(
        db_url: str, tmp_path: Path) -> None:
    first, second = two_copyright_files(tmp_path)
    hrag = HRAG(db_url, embedder=HashingEmbedder())
    hrag.ingest([first])
    [replaced] = hrag.ingest([second], replace=True).results
    assert replaced.status == "updated"
    assert hrag.sources()[0].metadata["file_path"] == str((second / "copyright.md").resolve())
    moved = tmp_path / "moved"
    second.rename(moved)  # the recorded file is gone: this is the same document, moved
    [same] = hrag.ingest([moved]).results
    assert (same.status, same.embedded) == ("unchanged", 0), "the path is not part of the text"
    assert hrag.sources()[0].metadata["file_path"] == str((moved / "copyright.md").resolve())
    (moved / "copyright.md").write_text("# jansson\n\njansson is licensed under the MIT license, still.\n",
                                        encoding="utf-8")
    assert [r.status for r in hrag.ingest([moved]).results] == ["updated"]


def test_the_cli_names_both_files_and_keeps_the_stored_one(db_url: str, tmp_path: Path) -> None:
    first, second = two_copyright_files(tmp_path)
    assert runner.invoke(cli.app, ["ingest", str(first)], env=env(db_url, tmp_path)).exit_code == 0
    refused = runner.invoke(cli.app, ["ingest", str(second)], env=env(db_url, tmp_path))
    assert refused.exit_code == 1
    assert str(first / "copyright.md") in refused.output and "Traceback" not in refused.output
    replaced = runner.invoke(cli.app, ["ingest", str(second), "--replace"], env=env(db_url, tmp_path))
    assert replaced.exit_code == 0 and "updated" in replaced.output
