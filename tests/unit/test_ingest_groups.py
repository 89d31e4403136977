"""Wide parents get group nodes so auto-merging has a level to merge into."""

from __future__ import annotations

from hrag_pg.ingest.groups import group_wide_parents
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.tree import MARKUP_KIND


def _section(n: int, words: int = 30) -> str:
    paragraphs = "\n\n".join(" ".join(f"w{i}x{j}" for j in range(words)) for i in range(n))
    return f"# Guide\n\n## Long section\n\n{paragraphs}\n\n## Short section\n\nOne.\n\nTwo.\n"


def test_a_wide_section_gets_groups_of_consecutive_paragraphs() -> None:
    tree = parse_markdown(_section(20), "guide.md")
    text_before = tree.root.full_text()
    group_wide_parents(tree, max_children=6, group_tokens=200)
    long_section = tree.root.children[0].children[0]
    assert {c.kind for c in long_section.children} == {"group"}
    sizes = [len(g.children) for g in long_section.children]
    assert sum(sizes) == 20 and all(2 <= s <= 5 for s in sizes[:-1])
    assert tree.root.full_text() == text_before, "groups hold no text: nothing moves, nothing duplicates"


def test_a_narrow_section_is_left_alone() -> None:
    tree = parse_markdown(_section(20), "guide.md")
    group_wide_parents(tree, max_children=6, group_tokens=200)
    short_section = tree.root.children[0].children[1]
    assert [c.kind for c in short_section.children] == ["paragraph", "paragraph"]


def test_subsections_are_never_wrapped() -> None:
    text = "# G\n\n" + "\n\n".join(f"## S{i}\n\nText {i}." for i in range(10))
    tree = parse_markdown(text, "g.md")
    group_wide_parents(tree, max_children=6)
    assert all(c.kind == "section" for c in tree.root.children[0].children)


def test_markup_is_never_grouped() -> None:
    # (a group's hit ratio counts its children; markup is never a hit)
    paragraphs = "\n\n".join(" ".join(f"w{i}x{j}" for j in range(30)) for i in range(10))
    tree = parse_markdown(f"[a]: #a\n\n{paragraphs}\n\n[b]: #b\n", "notes.md")
    group_wide_parents(tree, max_children=6, group_tokens=200)
    kinds = [c.kind for c in tree.root.children]
    assert kinds[0] == kinds[-1] == MARKUP_KIND and set(kinds[1:-1]) == {"group"}
    assert all(leaf.kind == "paragraph" for group in tree.root.children[1:-1] for leaf in group.children)
