"""A small pure-Python reference for parent-child (small-to-big), used only as a test oracle.

Same definition as ``hrag._parent_child_hits`` (what ``hrag.parent_child_hits``
and ``hrag.parent_child`` both run), written from its documented rule:

* the hits are taken in **rank order**: the order of the arrays for
  ``parent_child_hits`` ("array order is rank order"; the scores do not
  reorder them), score descending (ties by node id) for ``parent_child``;
* each hit expands to its parent, or through a ``group`` to the group's
  parent; a hit without a parent (a root) or an unknown id expands to nothing,
  but still holds its place in the rank order;
* the parents are visited in first-seen order (the rank of the first hit
  expanding to each); one that overlaps a parent already kept (is it, holds
  it or lies inside it) is skipped, and the visit stops at ``max_parents``
  kept parents;
* a kept parent's ``matched_children`` are the hits expanding to it, in rank
  order, among the first ``top_k_children`` ranks (all ranks when NULL),
  always including its first-seen hit; its ``score`` is the best of theirs.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np


def parent_child(
    parent: Mapping[Hashable, Hashable | None],
    kind: Mapping[Hashable, str],
    hits: Sequence[tuple[Hashable | None, float]],
    max_parents: int,
    top_k_children: int | None,
) -> list[dict]:
    """Return [{"parent", "rank", "score", "matched"}] in rank order.

    ``hits`` are (node, score) in rank order; node None (or a key not in
    ``parent``) is an id the database does not know.
    """

    def expands_to(node: Hashable | None) -> Hashable | None:
        if node is None or node not in parent:
            return None
        up = parent[node]
        if up is not None and kind[up] == "group":
            up = parent[up]
        return up

    def ancestors(node: Hashable) -> set[Hashable]:
        out, up = set(), parent[node]
        while up is not None:
            out.add(up)
            up = parent[up]
        return out

    first_seen: dict[Hashable, int] = {}
    for i, (node, _) in enumerate(hits):
        up = expands_to(node)
        if up is not None:
            first_seen.setdefault(up, i)

    kept: list[Hashable] = []
    for candidate in sorted(first_seen, key=first_seen.__getitem__):
        if any(candidate in ancestors(k) or k in ancestors(candidate) for k in kept):
            continue
        kept.append(candidate)
        if len(kept) >= max_parents:
            break

    result = []
    for rank, up in enumerate(kept, start=1):
        matched = [(node, score) for i, (node, score) in enumerate(hits)
                   if expands_to(node) == up
                   and (top_k_children is None or i < top_k_children or i == first_seen[up])]
        result.append({
            "parent": up,
            "rank": rank,
            "score": float(max(np.float32(score) for _, score in matched)),
            "matched": [node for node, _ in matched],
        })
    return result
