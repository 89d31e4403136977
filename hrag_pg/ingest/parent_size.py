"""Keep parents small enough to hand to an LLM (~3,000 tokens by default).

A parent is what retrieval returns, so a 20,000-token "section" would blow
the context budget.  :func:`enforce_parent_limit` fixes this in two steps:

1. a single leaf longer than the limit is split with the paragraph splitter
   (sentence, then word boundaries) into pieces within the limit;
2. every node whose children are all leaves and whose full text exceeds the
   limit is replaced by several sibling nodes of the same kind, each holding
   a contiguous run of the children within the limit.  The node's own text
   (its heading line) stays in the first part only, so text is stored once
   (later parts hold no text; their first child's separator carries on);
   titles become "Install (1/3)", "Install (2/3)"…, keys "Install#1"….  When
   the root itself is such a node, the runs are wrapped in "part" children.

Nodes with non-leaf children are not split: their size is the sum of their
children, each of which is within the limit, and auto-merging into them is
bounded by the retrieval-time context budget.  But where such a node is over
the limit, its runs of leaf children (an introduction before the first
subsection) are wrapped in "part" nodes within the limit, so a leaf's
parent is never bigger than the limit.  With ``on_oversize="error"``
nothing is changed and an oversize node raises :class:`IngestError` instead.
"""

from __future__ import annotations

from typing import Literal

from hrag_pg.errors import IngestError
from hrag_pg.ingest.children import LINE_KINDS, pieces_as_leaves, split_text
from hrag_pg.ingest.tokens import DEFAULT_COUNTER, TokenCounter, count_parts
from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree, DraftNode, contents_in_order


def _runs(node: DraftNode, limit: int, counter: TokenCounter,
          children: list[DraftNode] | None = None) -> list[list[DraftNode]]:
    """Greedy contiguous runs of ``children`` (default: ``node.children``) within ``limit`` (own text in the first)."""
    runs: list[list[DraftNode]] = []
    current: list[DraftNode] = []
    own = [DraftNode(kind=node.kind, content=node.content)] if node.content else []
    for child in node.children if children is None else children:
        candidate = [*(own if not runs else []), *current, child]
        if current and count_parts(counter, DraftNode(kind="part", children=candidate).text_parts()) > limit:
            runs.append(current)
            current = [child]
        else:
            current.append(child)
    if current:
        runs.append(current)
    return runs


def _parts(node: DraftNode, runs: list[list[DraftNode]]) -> list[DraftNode]:
    n = len(runs)
    return [
        DraftNode(
            kind=node.kind,
            content=node.content if i == 1 else "",
            title=f"{node.title} ({i}/{n})" if node.title else None,
            children=run,
            metadata={**node.metadata, "part": i, "parts": n},
            overlap_prefix=node.overlap_prefix if i == 1 else "",
            key=f"{node.key}#{i}" if node.key is not None else None,
            separator=node.separator,
        )
        for i, run in enumerate(runs, start=1)
    ]


def _text_tokens(node: DraftNode, counter: TokenCounter) -> int:
    """The tokens of a node's texts, each counted alone.

    Each text was counted already (the leaves and headings), so this asks the
    tokenizer nothing new, where counting the full text of a whole chapter
    would encode it once more for every level it sits under.
    """
    return sum(counter.count(n.content) for n in contents_in_order(node))


def _wrapped_leaf_runs(node: DraftNode, limit: int, counter: TokenCounter) -> list[DraftNode]:
    """``node.children`` with each run of consecutive leaves wrapped in "part" nodes within ``limit``.

    A leaf's parent is what parent-child returns for it.  Leaves beside
    sections (a chapter's introduction, a NEWS file's items before a late
    heading) had the whole chapter or document as their parent, up to
    121,000 tokens in the PostgreSQL manual; wrapped, their parent is the
    run of text they stand in.  The wrappers have no text and no title, so
    the full text and the leaves' embedded texts stay as they were.
    """
    out: list[DraftNode] = []
    run: list[DraftNode] = []
    number = 0

    def flush() -> None:
        nonlocal number
        for leaves in _runs(DraftNode(kind=node.kind), limit, counter, run):
            number += 1
            out.append(DraftNode(kind="part", children=leaves, key=f"text#{number}"))
        run.clear()

    for child in node.children:
        if child.is_leaf:
            run.append(child)
            continue
        flush()
        out.append(child)
    flush()
    return out


def _describe(tree: DocumentTree, node: DraftNode) -> str:
    return f"{tree.source}: {node.kind} {node.title or node.key or node.content[:40]!r}"


def enforce_parent_limit(
    tree: DocumentTree,
    *,
    max_parent_tokens: int = 3000,
    counter: TokenCounter = DEFAULT_COUNTER,
    on_oversize: Literal["split", "error"] = "split",
) -> DocumentTree:
    """Split (or refuse) parents whose full text exceeds ``max_parent_tokens``.

    Mutates and returns ``tree``; see the module docstring for the rules.
    """
    if on_oversize not in ("split", "error"):
        raise ValueError("on_oversize must be 'split' or 'error'")
    limit = max_parent_tokens

    # Step 1: leaves above the limit.
    for node, _ in list(tree.root.walk()):
        new_children: list[DraftNode] = []
        for child in node.children:
            tokens = counter.count(child.content) if child.is_leaf and child.kind != MARKUP_KIND else 0
            if tokens <= limit:
                new_children.append(child)
                continue
            if on_oversize == "error":
                raise IngestError(
                    f"{_describe(tree, child)} has {tokens} tokens, over the {limit}-token limit"
                )
            pieces = split_text(child.content, limit, counter, by_lines=child.kind in LINE_KINDS)
            new_children.extend(pieces_as_leaves(child, pieces))
        node.children = new_children

    # Step 2: parents of leaves above the limit, deepest first.
    def visit(node: DraftNode) -> list[DraftNode]:
        if node.is_leaf:
            return [node]
        if not all(child.is_leaf for child in node.children):
            node.children = [part for child in node.children for part in visit(child)]
            if any(child.is_leaf for child in node.children) and _text_tokens(node, counter) > limit:
                node.children = _wrapped_leaf_runs(node, limit, counter)
            return [node]
        tokens = count_parts(counter, node.text_parts())
        if tokens <= limit:
            return [node]
        if on_oversize == "error":
            raise IngestError(
                f"{_describe(tree, node)} has {tokens} tokens, over the {limit}-token limit"
            )
        runs = _runs(node, limit, counter)
        return [node] if len(runs) == 1 else _parts(node, runs)

    root = tree.root
    head, tail = _detach_edge_markup(root)
    replaced = visit(root)
    if len(replaced) > 1:  # the root itself was split: keep one root, wrap the runs
        for part in replaced:
            part.kind = "part"
            part.title = f"Part {part.metadata['part']}/{part.metadata['parts']}"
            part.key = f"part:{part.metadata['part']}"
            part.metadata = {"part": part.metadata["part"], "parts": part.metadata["parts"]}
        root.children = replaced
        if root.content:
            root.children[0].content = ""
    root.children = [*head, *root.children, *tail]
    return tree


def _detach_edge_markup(root: DraftNode) -> tuple[list[DraftNode], list[DraftNode]]:
    """Take the markup leaves before the root's first and after its last other child out of it.

    Markup is never a hit, so no parent is ever returned for it: it needs no part of its own
    and should not make one (the parts and their sizes are the text around it).  The readers
    put markup that has no next node to hold it only there, as the root's own leaves.
    """
    children = root.children
    first = next((i for i, c in enumerate(children) if c.kind != MARKUP_KIND), len(children))
    last = next((i for i in range(len(children) - 1, -1, -1) if children[i].kind != MARKUP_KIND), first - 1)
    head, tail = children[:first], children[last + 1:] if last >= first else []
    root.children = children[first:last + 1]
    return head, tail


__all__ = ["enforce_parent_limit"]
