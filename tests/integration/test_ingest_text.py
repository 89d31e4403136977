"""Ingesting strings: same trees, ids, transactions and re-embedding as files; user metadata; bad input."""

from __future__ import annotations

import math
import os
import uuid
from pathlib import Path

import psycopg
import pytest

from hrag_pg.api import HRAG, TextItem
from hrag_pg.errors import IngestError
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
GUIDE = (FIXTURES / "guide.md").read_text(encoding="utf-8")
RULES = (FIXTURES / "work_rules_ja.md").read_text(encoding="utf-8")


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    return HRAG(db_url, embedder=HashingEmbedder())


def node_ids(sql: psycopg.Connection, source: str) -> list[uuid.UUID]:
    return [r[0] for r in sql.execute(
        "SELECT n.id FROM hrag.nodes n JOIN hrag.documents d ON d.id = n.document_id "
        "WHERE d.source = %s ORDER BY n.seq", (source,))]


def document_metadata(sql: psycopg.Connection, source: str) -> dict:
    row = sql.execute("SELECT metadata FROM hrag.documents WHERE source = %s", (source,)).fetchone()
    assert row is not None
    return row[0]


def test_ingest_text_round_trips_the_text_through_node_text(hrag: HRAG, postgresql: psycopg.Connection) -> None:
    result = hrag.ingest_text(GUIDE, source="guide.md")
    assert result.status == "created" and result.nodes > 3
    root = node_ids(postgresql, "guide.md")[0]
    assert hrag.node_text(root) == GUIDE.strip("\n")



def test_a_string_and_the_same_file_are_one_document_with_the_same_ids(
        hrag: HRAG, postgresql: psycopg.Connection) -> None:
    from_text = hrag.ingest_text(RULES, source="work_rules_ja.md")
    ids = node_ids(postgresql, "work_rules_ja.md")
    report = hrag.ingest([FIXTURES / "work_rules_ja.md"])
    assert [r.status for r in report.results] == ["unchanged"]
    assert report.results[0].document_id == from_text.document_id
    assert node_ids(postgresql, "work_rules_ja.md") == ids


def test_reingesting_text_keeps_ids_and_reembeds_only_the_changed_child(
        hrag: HRAG, postgresql: psycopg.Connection) -> None:
    hrag.ingest_text(GUIDE, source="guide.md")
    ids = node_ids(postgresql, "guide.md")
    assert hrag.ingest_text(GUIDE, source="guide.md").status == "unchanged"
    edited = GUIDE.replace("2 GB of free memory", "4 GB of free memory")
    assert edited != GUIDE
    result = hrag.ingest_text(edited, source="guide.md")
    assert result.status == "updated"
    assert 1 <= result.embedded <= 2, result
    assert node_ids(postgresql, "guide.md") == ids


def test_user_metadata_is_stored_on_the_document_and_filters_retrieval(
        hrag: HRAG, postgresql: psycopg.Connection) -> None:
    hrag.ingest_texts([(RULES, "rules-ja", {"lang": "ja", "team": "hr"}),
                       TextItem(GUIDE, "guide-en", {"lang": "en"})])
    assert document_metadata(postgresql, "rules-ja")["lang"] == "ja"
    assert document_metadata(postgresql, "rules-ja")["strategy"] == "clauses", "hrag's own keys are kept"
    question = "試用期間中の通勤手当"
    for mode in ("parent_child", "auto_merge"):
        ja = getattr(hrag, mode)(question, filter={"lang": "ja"})
        en = getattr(hrag, mode)(question, filter={"lang": "en"})
        assert ja and en
        ja_doc = {r.document_id for r in ja}
        assert ja_doc.isdisjoint({r.document_id for r in en})
        assert not getattr(hrag, mode)(question, filter={"lang": "fr"})


def test_changing_only_the_metadata_updates_the_document_without_reembedding(
        hrag: HRAG, postgresql: psycopg.Connection) -> None:
    hrag.ingest_text(GUIDE, source="guide.md", metadata={"version": 1})
    result = hrag.ingest_text(GUIDE, source="guide.md", metadata={"version": 2})
    assert (result.status, result.embedded) == ("updated", 0)
    assert document_metadata(postgresql, "guide.md")["version"] == 2


@pytest.mark.parametrize(("text", "metadata", "message"), [
    ("", None, "empty"),
    ("  \n\t ", None, "empty"),
    ("# Title\n\nbad \x00 byte", None, "NUL character at offset"),
    (b"# bytes", None, "must be a str"),
    (GUIDE, ["lang", "ja"], "metadata must be a dict"),
    (GUIDE, "lang=ja", "metadata must be a dict"),
    (GUIDE, {"tags": {"a", "b"}}, "not JSON-serialisable"),
    (GUIDE, {"when": object()}, "not JSON-serialisable"),
    (GUIDE, {"score": math.nan}, "NaN"),
    (GUIDE, {1: "x"}, "keys must be strings"),
    (GUIDE, {"k": "a\x00b"}, "NUL"),
])
def test_bad_text_or_metadata_is_refused_and_the_stored_version_survives(
        hrag: HRAG, postgresql: psycopg.Connection, text: object, metadata: object, message: str) -> None:
    hrag.ingest_text(GUIDE, source="doc", metadata={"v": 1})
    before = node_ids(postgresql, "doc")
    with pytest.raises(IngestError, match=message) as excinfo:
        hrag.ingest_text(text, source="doc", metadata=metadata)  # type: ignore[arg-type]
    assert "doc" in str(excinfo.value), "the error names the source"
    assert node_ids(postgresql, "doc") == before
    assert document_metadata(postgresql, "doc")["v"] == 1


def test_a_bad_item_in_a_batch_is_refused_before_anything_is_written(
        hrag: HRAG, postgresql: psycopg.Connection) -> None:
    with pytest.raises(IngestError, match="second"):
        hrag.ingest_texts([(GUIDE, "first"), ("", "second"), (RULES, "third")])
    assert postgresql.execute("SELECT count(*) FROM hrag.documents").fetchone()[0] == 0
    with pytest.raises(IngestError, match=r"both have source 'same'"):
        hrag.ingest_texts([(GUIDE, "same"), (RULES, "same")])


@pytest.mark.parametrize(("format", "text"), [
    ("html", "<h1>Policy</h1><h2>Retention</h2><p>Messages are kept for 30 days.</p>"),
    ("text", "Messages are kept for 30 days.\n\nThey are then deleted."),
])
def test_html_and_plain_text_are_parsed_like_files_of_that_type(hrag: HRAG, format: str, text: str) -> None:
    hrag.ingest_text(text, source=f"policy.{format}", format=format)  # type: ignore[arg-type]
    results = hrag.auto_merge("How long are messages kept?")
    assert any("30 days" in r.content for r in results)


def test_file_names_do_not_depend_on_the_current_directory(
        hrag: HRAG, postgresql: psycopg.Connection, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "project" / "docs"
    (docs / "api").mkdir(parents=True)
    (docs / "guide.md").write_text(GUIDE, encoding="utf-8")
    (docs / "api" / "auth.md").write_text("# Auth\n\nTokens expire after one hour.\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "project")
    hrag.ingest(["docs/"])
    monkeypatch.chdir(tmp_path)
    second = hrag.ingest([os.path.join("project", "docs")])
    assert sorted(r.status for r in second.results) == ["unchanged", "unchanged"]
    monkeypatch.chdir(docs / "api")
    assert [r.status for r in hrag.ingest(["../guide.md"]).results] == ["unchanged"]
    sources = [r[0] for r in postgresql.execute("SELECT source FROM hrag.documents ORDER BY source")]
    assert sources == ["api/auth.md", "guide.md"]


def test_a_nested_file_ingested_alone_updates_the_document_its_directory_stored(
        hrag: HRAG, postgresql: psycopg.Connection, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "api").mkdir(parents=True)
    (docs / "guide.md").write_text(GUIDE, encoding="utf-8")
    auth = docs / "api" / "auth.md"
    auth.write_text("# Auth\n\nTokens expire after one hour.\n\nRefresh them with the CLI.\n", encoding="utf-8")
    hrag.ingest([docs])
    auth.write_text("# Auth\n\nTokens expire after two hours.\n\nRefresh them with the CLI.\n", encoding="utf-8")
    alone = hrag.ingest([auth]).results
    assert [(r.source, r.status) for r in alone] == [("api/auth.md", "updated")]
    assert alone[0].embedded == 1, "the unchanged paragraph's embedding is reused"
    (docs / "guide.md").write_text(GUIDE + "\nOne more line.\n", encoding="utf-8")
    hrag.ingest([docs / "guide.md"])
    hrag.ingest([docs])
    sources = [r[0] for r in postgresql.execute("SELECT source FROM hrag.documents ORDER BY source")]
    assert sources == ["api/auth.md", "guide.md"], "one document per file, whichever way it was named"


def test_a_file_stored_alone_keeps_its_name_when_its_directory_is_ingested(
        hrag: HRAG, postgresql: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "docs" / "api").mkdir(parents=True)
    auth = tmp_path / "docs" / "api" / "auth.md"
    auth.write_text("# Auth\n\nTokens expire after one hour.\n", encoding="utf-8")
    hrag.ingest([auth])
    assert [r.status for r in hrag.ingest([tmp_path / "docs"]).results] == ["unchanged"]
    sources = [r[0] for r in postgresql.execute("SELECT source FROM hrag.documents ORDER BY source")]
    assert sources == ["auth.md"]


def test_an_explicit_source_names_a_file_or_prefixes_a_directory(
        hrag: HRAG, postgresql: psycopg.Connection, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.md").write_text(GUIDE, encoding="utf-8")
    hrag.ingest([tmp_path / "a" / "x.md"], source="handbook")
    hrag.ingest([tmp_path / "a"], source="manual/")
    sources = [r[0] for r in postgresql.execute("SELECT source FROM hrag.documents ORDER BY source")]
    assert sources == ["handbook", "manual/x.md"]


def test_two_files_that_would_share_a_name_are_refused_before_writing(
        hrag: HRAG, postgresql: psycopg.Connection, tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "x.md").write_text(GUIDE, encoding="utf-8")
    with pytest.raises(IngestError, match=r"would both be stored as source 'x\.md'"):
        hrag.ingest([tmp_path / "a" / "x.md", tmp_path / "b"])
    assert postgresql.execute("SELECT count(*) FROM hrag.documents").fetchone()[0] == 0
