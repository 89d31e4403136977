"""Group the leaves of wide parents so auto-merging has a level to merge into.

A manual's section can have twenty paragraphs.  Auto-merging replaces hit
children by their parent only when half of them are hit, which twelve hits
spread over a long section almost never achieve: the section never merges,
and a broad question gets twelve scattered paragraphs.  LlamaIndex avoids
this with fixed-size levels (2048/512/128 tokens, about four children each);
we keep the document's own structure and add only what is missing: runs of
consecutive leaves under a wide parent are wrapped in ``group`` nodes of
about ``group_tokens`` tokens (a handful of paragraphs).  Now two hits in a
group merge it, and enough merged groups merge the section.

Groups hold no text of their own (storage is unchanged) and are transparent
to Parent–Child retrieval: ``hrag.parent_child`` expands a child to the
nearest ancestor that is not a group, i.e. the real section.
"""

from __future__ import annotations

from .tokens import DEFAULT_COUNTER, TokenCounter
from .tree import MARKUP_KIND, DocumentTree, DraftNode

GROUP_KIND = "group"


def group_wide_parents(
    tree: DocumentTree,
    *,
    max_children: int = 6,
    group_tokens: int = 512,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> DocumentTree:
    """Wrap runs of leaves under parents with more than ``max_children`` children.

    Runs are cut when the next leaf would take a group over ``group_tokens``
    (a group always holds at least one leaf); a run of fewer than two leaves
    is left as it is.  Mutates and returns ``tree``.
    """
    if max_children < 2 or group_tokens < 1:
        raise ValueError("max_children must be >= 2 and group_tokens >= 1")
    for node, _ in list(tree.root.walk()):
        if len(node.children) > max_children and node.kind != GROUP_KIND:
            node.children = _grouped(node.children, group_tokens, counter)
    return tree


def _grouped(children: list[DraftNode], group_tokens: int, counter: TokenCounter) -> list[DraftNode]:
    out: list[DraftNode] = []
    run: list[DraftNode] = []
    run_tokens = 0
    number = 0

    def close() -> None:
        nonlocal run, run_tokens, number
        if len(run) >= 2:
            number += 1
            out.append(DraftNode(kind=GROUP_KIND, children=run, key=f"group{number}"))
        else:
            out.extend(run)
        run, run_tokens = [], 0

    for child in children:
        if not child.is_leaf or child.kind == MARKUP_KIND:  # (markup is never a hit: no group counts it)
            close()
            out.append(child)
            continue
        tokens = counter.count(child.overlap_prefix + child.content)
        if run and run_tokens + tokens > group_tokens:
            close()
        run.append(child)
        run_tokens += tokens
    close()
    return out
