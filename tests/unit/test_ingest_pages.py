from __future__ import annotations

from pathlib import Path

import pytest

from hrag_pg.errors import IngestError
from hrag_pg.ingest.pages import parse_pages_text, parse_pdf

from .ingest_checks import FIXTURES, assert_leaves_nonempty, assert_text_preserved, shape


def test_form_feeds_split_text_into_numbered_pages_of_paragraphs() -> None:
    text = "Intro.\n\nSecond para.\fPage two text.\f\f  \fLast page."
    tree = parse_pages_text(text, "doc.txt")
    pages = tree.root.children
    assert [p.title for p in pages] == ["Page 1", "Page 2", "Page 5"]  # blank pages keep numbering
    assert [p.metadata for p in pages] == [{"page": 1}, {"page": 2}, {"page": 5}]
    assert all(p.kind == "page" and p.content == "" for p in pages)
    assert [c.content for c in pages[0].children] == ["Intro.", "Second para."]
    assert_text_preserved(text, tree)


def test_pdf_pages_become_page_nodes_with_paragraph_text() -> None:
    tree = parse_pdf(FIXTURES / "sample.pdf", "sample.pdf")
    assert [(d, k) for d, k, _ in shape(tree.root)] == [
        (0, "document"),
        (1, "page"),
        (2, "paragraph"),
        (1, "page"),
        (2, "paragraph"),
    ]
    assert "within 30 days" in tree.root.children[0].full_text()
    assert "500 EUR" in tree.root.children[1].full_text()
    assert_leaves_nonempty(tree)


def test_unreadable_pdf_raises_ingest_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(IngestError, match=r"broken\.pdf"):
        parse_pdf(bad, "broken.pdf")


def test_pdf_without_text_raises_ingest_error(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(FIXTURES))
    try:
        from make_pdf import build_pdf
    finally:
        sys.path.remove(str(FIXTURES))
    empty = tmp_path / "scan.pdf"
    empty.write_bytes(build_pdf([[]]))
    with pytest.raises(IngestError, match="no extractable text"):
        parse_pdf(empty, "scan.pdf")
