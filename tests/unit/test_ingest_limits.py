from __future__ import annotations

import pytest

from hrag_pg.errors import IngestError
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.parent_size import enforce_parent_limit
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree, DraftNode

from .ingest_checks import assert_leaves_nonempty, assert_text_preserved

counter = ApproximateTokenCounter()


def paragraph(n: int) -> str:
    return " ".join(f"word{n}x{i}" for i in range(30)) + "."  # 39 tokens


def big_section_doc(paragraphs: int = 10) -> str:
    body = "\n\n".join(paragraph(n) for n in range(paragraphs))
    return f"# Guide\n\n## Install\n\n{body}\n\n## Short\n\nTiny."


def test_oversize_parent_of_leaves_is_split_into_numbered_siblings() -> None:
    text = big_section_doc()
    tree = enforce_parent_limit(
        parse_markdown(text, "g.md"), max_parent_tokens=100, counter=counter
    )
    guide = tree.root.children[0]
    parts = [c for c in guide.children if c.title and c.title.startswith("Install")]
    assert [p.title for p in parts] == [
        f"Install ({i}/{len(parts)})" for i in range(1, len(parts) + 1)
    ]
    assert [p.key for p in parts] == [f"Install#{i}" for i in range(1, len(parts) + 1)]
    assert all(p.kind == "section" for p in parts)
    assert all(counter.count(p.full_text()) <= 100 for p in parts)
    assert parts[0].content == "## Install" and all(p.content == "" for p in parts[1:])
    assert guide.children[-1].title == "Short"
    assert_text_preserved(text, tree)
    assert_leaves_nonempty(tree)


def test_parents_within_the_limit_are_untouched() -> None:
    text = big_section_doc(2)
    tree = enforce_parent_limit(parse_markdown(text, "g.md"), counter=counter)
    assert [c.title for c in tree.root.children[0].children] == ["Install", "Short"]


def test_single_leaf_over_the_limit_is_split_first() -> None:
    text = " ".join(f"Sentence {i} is long enough to count." for i in range(100))
    root = DraftNode(
        kind="document",
        children=[
            DraftNode(
                kind="section",
                content="S",
                key="S",
                children=[DraftNode(kind="paragraph", content=text)],
            )
        ],
    )
    tree = enforce_parent_limit(DocumentTree("x", root), max_parent_tokens=120, counter=counter)
    for section in tree.root.children:
        assert counter.count(section.full_text()) <= 120
        assert all(counter.count(leaf.content) <= 120 for leaf in section.children)
    assert "".join(leaf.content for leaf in tree.root.leaves()) == text


def test_oversize_root_wraps_runs_in_part_nodes() -> None:
    root = DraftNode(
        kind="document",
        children=[DraftNode(kind="paragraph", content=paragraph(n)) for n in range(6)],
    )
    tree = enforce_parent_limit(DocumentTree("x", root), max_parent_tokens=100, counter=counter)
    assert [c.kind for c in tree.root.children] == ["part", "part", "part"]
    assert [c.title for c in tree.root.children] == ["Part 1/3", "Part 2/3", "Part 3/3"]


def test_error_mode_refuses_with_a_clear_message() -> None:
    tree = parse_markdown(big_section_doc(), "g.md")
    with pytest.raises(
        IngestError, match=r"g\.md: section 'Install' has \d+ tokens, over the 100-token limit"
    ):
        enforce_parent_limit(tree, max_parent_tokens=100, counter=counter, on_oversize="error")


def parent_sizes(tree: DocumentTree) -> list[int]:
    """The full-text size of every leaf's parent (what parent-child returns for it)."""
    return [counter.count(node.full_text()) for node, _ in tree.root.walk()
            if any(child.is_leaf for child in node.children)]


@pytest.mark.parametrize("layout", ["heading at the end", "introduction before sections"])
def test_leaves_beside_sections_get_a_parent_within_the_limit(layout: str) -> None:
    # A NEWS file whose last item is underlined (a late setext heading), or a chapter whose
    # introduction precedes its sections: the leaves' parent was the whole document.
    items = "\n\n".join(paragraph(i) for i in range(12))
    text = (f"{items}\n\nFinal notes\n-----------\n\nThe end.\n" if layout == "heading at the end"
            else f"# Chapter\n\n{items}\n\n## One\n\n{paragraph(20)}\n\n## Two\n\n{paragraph(21)}\n")
    tree = enforce_parent_limit(parse_markdown(text, "news.md"), max_parent_tokens=100, counter=counter)
    assert counter.count(text) > 100
    assert max(parent_sizes(tree)) <= 100
    assert_text_preserved(text, tree)
    wrappers = [node for node, _ in tree.root.walk() if node.kind == "part"]
    assert len(wrappers) >= 2 and all(w.title is None and not w.content for w in wrappers)


_DEFINITIONS = "\n".join(f"[name{i}]: #anchor-{i}" for i in range(40))  # ~200 tokens of markup


@pytest.mark.parametrize("layout", ["sections", "leaves only"])
def test_markup_at_the_ends_of_an_oversize_document_stays_the_roots_own_leaf(layout: str) -> None:
    # (a "part" around it would be a parent of nothing searchable: markup is never a hit)
    body = big_section_doc() if layout == "sections" else "\n\n".join(paragraph(n) for n in range(12))
    text = f"{_DEFINITIONS}\n\n{body}\n\n{_DEFINITIONS}\n"
    tree = enforce_parent_limit(parse_markdown(text, "guide.md"), max_parent_tokens=100, counter=counter)
    first, *middle, last = tree.root.children
    assert (first.kind, first.content, last.kind, last.content) == (
        MARKUP_KIND, _DEFINITIONS, MARKUP_KIND, _DEFINITIONS)
    assert not any(node.kind == MARKUP_KIND for child in middle for node, _ in child.walk())
    assert max(parent_sizes(DocumentTree(source="x", root=DraftNode(kind="document", children=middle)))) <= 100
    assert_text_preserved(text, tree)


def test_markup_over_the_limit_is_neither_split_nor_refused() -> None:
    text = f"# Guide\n\nShort.\n\n{_DEFINITIONS}\n"
    assert counter.count(_DEFINITIONS) > 100
    tree = enforce_parent_limit(parse_markdown(text, "guide.md"), max_parent_tokens=100, counter=counter,
                                on_oversize="error")
    assert (tree.root.children[-1].kind, tree.root.children[-1].content) == (MARKUP_KIND, _DEFINITIONS)
