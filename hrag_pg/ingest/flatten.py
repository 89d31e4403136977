"""Turn a DraftNode tree into the rows of ``hrag.nodes`` (pure, no database).

This is where the tree gets its identity and its bookkeeping:

* **Deterministic ids**: ``uuid5`` over (collection, source, structural
  path), where the path is built from node keys (``第4条``, a heading) or
  kind + position.  Re-ingesting the same text yields the same ids; the same
  passage in two documents never collides.
* **Pre-order numbering** (``seq``/``subtree_end``), ``depth``, ``position``
  and ``child_count`` (the hit-ratio denominator).
* **Embedded text**: search targets (leaves, but not markup) are embedded as
  ``[heading > path] overlap+content`` so a child carries its context, while
  ``content`` stays the original text.
* **Content hashes** over the embedded text and the model name, so an
  unchanged child keeps its embedding across re-ingestion; a structural
  node's hash covers its text *and* its separator, and the document's hash
  covers every node's separator, so a whitespace-only edit is a change.
* **Separators**: each row keeps the original text between the previous
  node with content and its own (see :class:`~hrag_pg.ingest.tree.DraftNode`),
  from which ``hrag.node_text`` rebuilds any node's text exactly.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import IngestError
from .tokens import DEFAULT_COUNTER, TokenCounter
from .tree import MARKUP_KIND, DocumentTree, DraftNode

#: Namespace of every hrag id (uuid5).
HRAG_NAMESPACE = uuid.UUID("6f1c8e2a-3b7d-5c1e-9a4f-2d8b0e6a7c35")
_SEP = "\x1f"
#: The document metadata key recording the file a document was read from.  It is left out of the
#: document's hash: a moved or copied file, or the same text given as a string, is the same document.
FILE_PATH_KEY = "file_path"
#: Longest source name: (collection, source) is a btree key (at most 2,704 bytes per entry), and a
#: collection name may take 1,024 bytes (256 characters of up to 4 bytes).
MAX_SOURCE_BYTES = 1500


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 60 else repr(value[:57] + "...")


def document_id(collection: str, source: str) -> uuid.UUID:
    return uuid.uuid5(HRAG_NAMESPACE, f"{collection}{_SEP}{source}")


def node_id(collection: str, source: str, path: str) -> uuid.UUID:
    return uuid.uuid5(HRAG_NAMESPACE, f"{collection}{_SEP}{source}{_SEP}{path}")


def _sha(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def embedding_text(heading_path: list[str], overlap_prefix: str, content: str) -> str:
    """The text a child is embedded as: its heading path, then its (overlapped) content."""
    body = f"{overlap_prefix}{content}" if overlap_prefix else content
    return f"[{' > '.join(heading_path)}] {body}" if heading_path else body


@dataclass
class NodeRow:
    """One row of ``hrag.nodes`` (embedding filled in later by the writer)."""

    id: uuid.UUID
    parent_id: uuid.UUID | None
    depth: int
    position: int
    kind: str
    title: str | None
    heading_path: list[str]
    content: str
    token_count: int
    child_count: int
    seq: int
    subtree_end: int
    content_hash: str
    metadata: dict[str, Any]
    #: The text to embed, or None for nodes that are not search targets.
    embed_text: str | None = None
    #: The tokens of the node's full text (token_count of the subtree's nodes with text, plus the
    #: separators between them that hold more than whitespace): the unit of budgets (hrag.retrieve).
    subtree_tokens: int = 0
    #: Original text between the previous row with content (in seq order) and this row's content.
    separator: str = "\n\n"


@dataclass
class FlatDocument:
    """A document ready to write: its row facts and its nodes in pre-order."""

    id: uuid.UUID
    collection: str
    source: str
    title: str | None
    metadata: dict[str, Any]
    nodes: list[NodeRow] = field(default_factory=list)
    content_hash: str = ""

    @property
    def search_targets(self) -> list[NodeRow]:
        return [n for n in self.nodes if n.embed_text is not None]


def _check_text(tree: DocumentTree, node: DraftNode, value: str | None, what: str) -> None:
    if value and "\x00" in value:
        raise IngestError(
            f"{tree.source}: {node.kind} {node.title or node.key or ''!s} contains a NUL byte in its {what}; "
            "PostgreSQL text cannot store NUL bytes"
        )


def flatten(
    tree: DocumentTree,
    *,
    collection: str = "default",
    model_name: str = "",
    counter: TokenCounter = DEFAULT_COUNTER,
) -> FlatDocument:
    """Number, identify and hash a tree; the result is exactly what gets written."""
    if not collection or len(collection) > 256:
        raise IngestError(f"collection name must be 1 to 256 characters, got {len(collection)}")
    if not tree.source:
        raise IngestError("a document needs a non-empty source name")
    for value, what in ((collection, "collection"), (tree.source, "source")):
        if "\x00" in value:
            raise IngestError(f"the {what} name {value!r} contains a NUL byte")
        if _SEP in value:
            # The separator of the id and lock keys: ("a\x1fb", "c") and ("a", "b\x1fc")
            # would otherwise get the same document id and overwrite each other.
            raise IngestError(f"the {what} name {_shown(value)} contains the control character U+001F")
    size = len(tree.source.encode("utf-8"))
    if size > MAX_SOURCE_BYTES:
        raise IngestError(
            f"the source name {_shown(tree.source)} is {size:,} bytes in UTF-8; the limit is "
            f"{MAX_SOURCE_BYTES:,} (it is indexed together with the collection name)"
        )
    doc = FlatDocument(
        id=document_id(collection, tree.source),
        collection=collection,
        source=tree.source,
        title=tree.title or tree.root.title,
        metadata=dict(tree.metadata),
    )
    root_title = tree.title or tree.root.title

    def visit(node: DraftNode, parent: NodeRow | None, path: str, depth: int, position: int,
              ancestors_titles: list[str]) -> NodeRow:
        _check_text(tree, node, node.content, "content")
        _check_text(tree, node, node.title, "title")
        _check_text(tree, node, node.separator, "separator")
        title = node.title if node.title else (root_title if depth == 0 else None)
        # A document's H1 usually repeats its title: don't say it twice in the path.
        repeats = bool(ancestors_titles) and ancestors_titles[-1] == title
        heading_path = [*ancestors_titles, title] if title and not repeats else list(ancestors_titles)
        content, metadata = node.content, dict(node.metadata)
        # Markup leaves hold text no reader sees (a link's target): nothing to search for.
        is_target = node.is_leaf and depth > 0 and node.kind != MARKUP_KIND
        if node.kind == "qa":
            # The question is what gets searched; it is not part of the parent's text.
            metadata["question"] = content
            search_text, content = content, ""
        else:
            search_text = content
        row = NodeRow(
            id=node_id(collection, tree.source, path),
            parent_id=parent.id if parent else None,
            depth=depth,
            position=position,
            kind=node.kind,
            title=title,
            heading_path=heading_path,
            content=content,
            token_count=counter.count(search_text) if search_text else 0,
            child_count=len(node.children),
            seq=len(doc.nodes),
            subtree_end=-1,
            content_hash="",
            metadata=metadata,
            separator=node.separator,
        )
        if is_target:
            row.embed_text = embedding_text(ancestors_titles, node.overlap_prefix, search_text)
            row.content_hash = _sha("embed", model_name, row.embed_text)
        else:
            row.content_hash = _sha("node", node.kind, title or "", content, node.separator)
        doc.nodes.append(row)
        if node.separator.strip():
            separator_tokens[row.seq] = counter.count(node.separator)

        used: dict[str, int] = {}
        child_titles = heading_path
        for i, child in enumerate(node.children):
            segment = child.key or f"{child.kind}{i}"
            count = used.get(segment, 0)
            used[segment] = count + 1
            if count:
                segment = f"{segment}~{count}"
            visit(child, row, f"{path}/{segment}", depth + 1, i, child_titles)
        row.subtree_end = len(doc.nodes) - 1
        # The size of the node's full text, as retrieval returns it: its texts and the separators
        # between them (markup kept there, like an rST ``.. _label:``, is returned too).
        texts = [d.seq for d in doc.nodes[row.seq:] if d.content]
        row.subtree_tokens = (sum(doc.nodes[seq].token_count for seq in texts)
                              + sum(separator_tokens.get(seq, 0) for seq in texts[1:]))
        return row

    separator_tokens: dict[int, int] = {}  # by seq: the tokens of separators that hold more than whitespace

    visit(tree.root, None, "", 0, 0, [])
    if not doc.search_targets:
        markup = any(n.kind == MARKUP_KIND for n in doc.nodes)
        raise IngestError(f"{tree.source}: the document's structure yields no leaves to search"
                          + (" (it holds only markup: link definitions, targets, navigation)" if markup else ""))
    doc.content_hash = document_hash(doc.title, doc.metadata,
                                     [(n.id, n.parent_id, n.content_hash, n.separator, n.metadata) for n in doc.nodes])
    return doc


def document_hash(title: str | None, metadata: dict[str, Any],
                  nodes: list[tuple[uuid.UUID, uuid.UUID | None, str, str, dict[str, Any]]]) -> str:
    """A document's content hash from its title, metadata and (id, parent id, hash, separator, metadata) per node.

    The file it came from is left out: a moved file is the same document.
    """
    return _sha(
        "document",
        title or "",
        json.dumps({k: v for k, v in metadata.items() if k != FILE_PATH_KEY},
                   sort_keys=True, ensure_ascii=False, default=str),
        *(f"{node_id}{_SEP}{parent_id}{_SEP}{content_hash}{_SEP}{separator}{_SEP}"
          f"{json.dumps(node_metadata, sort_keys=True, ensure_ascii=False, default=str)}"
          for node_id, parent_id, content_hash, separator, node_metadata in nodes),
    )
