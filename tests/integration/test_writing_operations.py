"""The writing operations (``HRAG.writer``) on their edges: what each refuses, reports and skips.

The common paths (ingest, re-ingest, rename, reembed) are the subject of the
ingestion, citation and model tests; these are the cases those leave out.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from hrag_pg.api import HRAG, TextItem
from hrag_pg.errors import IngestError, NotFound
from hrag_pg.ingest.loaders import load_document
from hrag_pg.operations.writing import _sample_files
from tests.embedders import HashingEmbedder

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@pytest.fixture
def hrag(db_url: str) -> HRAG:
    return HRAG(db_url, embedder=HashingEmbedder())


def test_renaming_in_an_unknown_collection_names_the_collections_that_exist(hrag: HRAG, tmp_path: Path) -> None:
    hrag.writer.ingest_text("# Keys\n\nRotate them.", source="keys.md", collection="ops")
    with pytest.raises(NotFound, match="no collection 'nope' in this database; collections: ops"):
        hrag.writer.rename_from_paths([FIXTURES / "guide.md"], collection="nope")


def test_a_rename_whose_new_name_is_stored_too_is_left_alone(hrag: HRAG, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(FIXTURES / "guide.md", docs / "guide.md")
    monkeypatch.chdir(tmp_path)
    hrag.writer.ingest_tree(load_document(Path("docs/guide.md"), source="docs/guide.md"))  # the old naming
    hrag.writer.ingest([docs / "guide.md"])  # and today's: "guide.md"
    [plan] = hrag.writer.rename_from_paths([docs])
    assert (plan.old, plan.status) == (None, "both 'docs/guide.md' and 'guide.md' are stored; delete one first")
    assert {s.source for s in hrag.sources()} == {"docs/guide.md", "guide.md"}


def test_ingesting_texts_reports_progress_per_item_and_names_a_malformed_one(hrag: HRAG) -> None:
    seen: list[tuple[str, int, int]] = []
    report = hrag.writer.ingest_texts([TextItem("# A\n\nOne.", "a.md"), ("# B\n\nTwo.", "b.md")],
                                      progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert [r.source for r in report.results] == ["a.md", "b.md"]
    assert seen == [("files", 1, 2), ("files", 2, 2)]
    with pytest.raises(IngestError, match=r"item 1 must be a TextItem or a \(text, source.* tuple, got str"):
        hrag.writer.ingest_texts([("# C\n\nThree.", "c.md"), "just a string"])  # type: ignore[list-item]
    assert {s.source for s in hrag.sources()} == {"a.md", "b.md"}, "nothing of the refused batch is written"


def test_the_model_choice_samples_text_files_and_skips_pdfs_and_unreadable_ones(tmp_path: Path) -> None:
    text = tmp_path / "rules.md"
    text.write_text("就業規則", encoding="utf-8")
    packed = tmp_path / "README.md.gz"
    packed.write_bytes(gzip.compress(b"Read me first."))
    samples = _sample_files([(FIXTURES / "sample.pdf", "sample.pdf"), (tmp_path / "gone.md", "gone.md"),
                             (text, "rules.md"), (packed, "README.md.gz")])
    assert samples == ["就業規則", "Read me first."]
