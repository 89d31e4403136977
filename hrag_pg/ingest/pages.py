"""Paged documents → document > page > paragraph (the "pages" strategy).

For PDFs and other paginated sources the page is the natural parent: it is
what a reader cites ("see page 12") and what a PDF extractor reliably
delivers.  Page numbers are kept 1-based in metadata even when a blank page
produces no node, so citations stay right.  The document's text is its pages
joined by form feeds (``\f``, as ``pdftotext`` writes them); pages hold no
text of their own, and the first paragraph of a page carries the page break
in its ``separator``, so the root's full text is that document.  pypdf is an optional extra and
is imported only when a PDF is actually read.
"""

from __future__ import annotations

from pathlib import Path

from hrag_pg.errors import IngestError, install_extra
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import TextCursor, add_child, block_spans, normalise_text


def build_pages(pages: list[str], source: str, *, title: str | None = None) -> DocumentTree:
    """Tree from already extracted page texts (index 0 is page 1).

    The full text of the root is the pages joined by form feeds (``\\f``).
    """
    pages = [normalise_text(page) for page in pages]
    cursor = TextCursor("\f".join(pages))
    root = DraftNode(kind="document", content="", title=title)
    offset = 0
    for number, page_text in enumerate(pages, start=1):
        start_of_page, offset = offset, offset + len(page_text) + 1
        blocks = [(start_of_page + start, start_of_page + end) for start, end in block_spans(page_text)
                  if page_text[start:end].strip()]
        if not blocks:
            continue
        page = add_child(
            root,
            DraftNode(
                kind="page",
                content="",
                title=f"Page {number}",
                key=f"page:{number}",
                metadata={"page": number},
            ),
        )
        for start, end in blocks:
            cursor.leaf(page, start, end, "paragraph", lstrip=True, metadata={"page": number})
    return DocumentTree(
        source=source, root=root, title=title, metadata={"strategy": "pages", "pages": len(pages)}
    )


def parse_pages_text(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Split plain text on form feeds (``\\f``, what ``pdftotext`` emits) into pages."""
    return build_pages(normalise_text(text).split("\f"), source, title=title)


def extract_pdf_pages(path: Path) -> tuple[list[str], str | None]:
    """Text of each page and the PDF's title, or :class:`IngestError` naming the file."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise IngestError(
            f"{path}: reading PDF files needs pypdf; install the pdf extra: {install_extra('pdf')}"
        ) from exc
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(f"{path}: the PDF is encrypted with a password; decrypt it first")
        pages = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
    except IngestError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, AttributeError) as exc:
        raise IngestError(f"{path}: not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not any(page.strip() for page in pages):
        raise IngestError(
            f"{path}: the PDF has no extractable text (a scanned image?); run OCR on it first"
        )
    return pages, (str(meta_title).strip() or None) if meta_title else None


def parse_pdf(path: Path, source: str, *, title: str | None = None) -> DocumentTree:
    """Read a PDF with pypdf into document > page > paragraph."""
    pages, meta_title = extract_pdf_pages(path)
    return build_pages(pages, source, title=title if title is not None else meta_title)


__all__ = ["build_pages", "extract_pdf_pages", "parse_pages_text", "parse_pdf"]
