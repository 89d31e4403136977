"""A small pure-Python reference for the auto-merge, used only as a test oracle.

Same definition as hrag.auto_merge_hits: a node is covered if hit or if the
share of its covered children is >= threshold (compared in float32, as the
SQL compares `real`s); results are covered nodes without a covered ancestor.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np


def auto_merge(
    parent: Mapping[Hashable, Hashable | None],
    child_count: Mapping[Hashable, int],
    hits: Mapping[Hashable, float],
    threshold: float,
) -> dict[Hashable, dict]:
    """Return {result_node: {"score", "merged_from", "hit_ratio"}}."""
    depth: dict[Hashable, int] = {}

    def depth_of(n: Hashable) -> int:
        if n not in depth:
            p = parent[n]
            depth[n] = 0 if p is None else depth_of(p) + 1
        return depth[n]

    def ancestors(n: Hashable) -> list[Hashable]:
        out, p = [], parent[n]
        while p is not None:
            out.append(p)
            p = parent[p]
        return out

    covered = set(hits)
    ratios: dict[Hashable, float] = {}
    candidates = set(hits) | {a for h in hits for a in ancestors(h)}
    max_depth = max((depth_of(n) for n in candidates), default=0)
    t = np.float32(threshold)
    for level in range(max_depth, 0, -1):
        counts: dict[Hashable, int] = {}
        for n in candidates:
            if depth_of(n) == level and n in covered:
                counts[parent[n]] = counts.get(parent[n], 0) + 1
        for p, c in counts.items():
            if child_count[p] > 0:
                ratio = np.float32(c) / np.float32(child_count[p])
                if ratio >= t:
                    covered.add(p)
                    ratios[p] = float(ratio)
    result = {}
    for n in covered:
        if any(a in covered for a in ancestors(n)):
            continue
        inside = [h for h in hits if n in ancestors(h)]
        result[n] = {
            "score": max([hits[h] for h in inside] + ([hits[n]] if n in hits else [])),
            "merged_from": set(inside),
            "hit_ratio": ratios.get(n),
        }
    return result
