"""Unstructured text → document > window > paragraph (the "window" strategy).

Transcripts, OCR output and plain notes have no headings or numbering, but
a retrieved paragraph still needs its surroundings.  Consecutive paragraphs
are packed into "window" parents of about ``parent_tokens`` tokens (1,200 by
default), cutting only between paragraphs; a single paragraph longer than a
window is cut at sentence boundaries (words, as a last resort) and its
pieces spread over windows.  Windows do not overlap: text is stored once,
and the children's ``overlap_prefix`` handles terms cut at a boundary.
Windows hold no text of their own; each paragraph's ``separator`` is the
blank line(s) before it (nothing for the continuation of a cut paragraph).
"""

from __future__ import annotations

from hrag_pg.ingest.children import split_text
from hrag_pg.ingest.tokens import DEFAULT_COUNTER, TokenCounter
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import TextCursor, add_child, block_spans, normalise_text


def parse_window(
    text: str,
    source: str,
    *,
    parent_tokens: int = 1200,
    counter: TokenCounter = DEFAULT_COUNTER,
    title: str | None = None,
) -> DocumentTree:
    """Pack paragraphs into windows of at most ~``parent_tokens`` tokens."""
    if parent_tokens < 1:
        raise ValueError("parent_tokens must be at least 1")
    cursor = TextCursor(normalise_text(text))
    paragraphs: list[DraftNode] = []
    for start, end in block_spans(cursor.text):
        block = cursor.text[start:end]
        if not block.strip():
            continue
        for piece in split_text(block, parent_tokens, counter):
            node = cursor.node(start, start + len(piece), "paragraph", lstrip=True)
            start += len(piece)
            if node is not None:
                paragraphs.append(node)

    windows: list[list[DraftNode]] = []
    size = 0
    for paragraph in paragraphs:
        tokens = counter.count(paragraph.content)
        if windows and size + tokens <= parent_tokens:
            windows[-1].append(paragraph)
            size += tokens
        else:
            windows.append([paragraph])
            size = tokens

    root = DraftNode(kind="document", content="", title=title)
    for number, window_paragraphs in enumerate(windows, start=1):
        window = add_child(
            root,
            DraftNode(
                kind="window",
                content="",
                title=f"Window {number}",
                key=f"window:{number}",
                metadata={"window": number},
            ),
        )
        for paragraph in window_paragraphs:
            add_child(window, paragraph)
    root.children = [window for window in root.children if window.children]
    return DocumentTree(source=source, root=root, title=title, metadata={"strategy": "window"})


__all__ = ["parse_window"]
