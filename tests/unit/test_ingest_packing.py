"""Packing short blocks into children: exact text, stable boundaries, headings strategy only."""

from __future__ import annotations

from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.packing import pack_short_leaves
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import DocumentTree

COUNTER = ApproximateTokenCounter()


def _doc(blocks: list[str]) -> DocumentTree:
    return parse_markdown("# Guide\n\n## Section\n\n" + "\n\n".join(blocks) + "\n", "guide.md")


def _leaf_texts(tree: DocumentTree) -> list[str]:
    return [leaf.content for leaf in tree.root.leaves()]


def test_a_lead_in_is_packed_with_the_block_it_introduces_and_no_text_is_lost() -> None:
    blocks = ["For example:", "```\nSELECT 1;\n```", " ".join(["word"] * 60)]
    tree = _doc(blocks)
    before = tree.root.full_text()
    pack_short_leaves(tree, pack_tokens=120, counter=COUNTER)
    texts = _leaf_texts(tree)
    assert any(t.startswith("For example:\n\n```") for t in texts), texts
    assert tree.root.full_text() == before


def test_long_blocks_end_packs_and_are_never_joined_to_each_other() -> None:
    long_block = " ".join(["alpha"] * 70)
    tree = _doc([long_block, long_block.replace("alpha", "beta")])
    pack_short_leaves(tree, pack_tokens=120, counter=COUNTER)
    assert len(_leaf_texts(tree)) == 2


def test_editing_one_short_block_changes_at_most_two_packs() -> None:
    blocks = [f"Short remark number {i} about topic {i * 7}." for i in range(30)]
    before = set(_leaf_texts(pack_short_leaves(_doc(blocks), pack_tokens=120, counter=COUNTER)))
    for edited in range(30):
        changed = list(blocks)
        changed[edited] = changed[edited].replace("remark", "much longer remark, edited")
        after = set(_leaf_texts(pack_short_leaves(_doc(changed), pack_tokens=120, counter=COUNTER)))
        assert len(after - before) <= 2, f"editing block {edited} re-packed {len(after - before)} children"


def test_packing_is_off_at_zero_and_for_other_strategies() -> None:
    blocks = ["One.", "Two.", "Three."]
    assert len(_leaf_texts(pack_short_leaves(_doc(blocks), pack_tokens=0, counter=COUNTER))) == 3
    tree = _doc(blocks)
    tree.metadata["strategy"] = "clauses"
    flat = prepare_tree(tree, IngestOptions(pack_tokens=120), counter=COUNTER)
    assert len([n for n in flat.nodes if n.embed_text is not None]) == 3


def test_ingest_options_refuse_the_ranges_the_cli_refuses_naming_the_python_argument() -> None:
    import pytest

    from hrag_pg.errors import InvalidArgument

    for kwargs, name in (({"max_child_tokens": 0}, "max_child_tokens"), ({"overlap_tokens": -1}, "overlap_tokens"),
                         ({"max_parent_tokens": 0}, "max_parent_tokens"), ({"window_tokens": 10**6}, "window_tokens")):
        with pytest.raises(InvalidArgument, match=name):
            IngestOptions(**kwargs)  # type: ignore[arg-type]
