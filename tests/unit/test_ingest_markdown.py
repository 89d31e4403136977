from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from hrag_pg.ingest.markdown import heading_of, parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import MARKUP_KIND

from .ingest_checks import FIXTURES, assert_leaves_nonempty, assert_text_preserved, find, shape


def guide():
    text = (FIXTURES / "guide.md").read_text(encoding="utf-8")
    return text, parse_markdown(text, "guide.md")


def test_headings_nest_by_level_into_sections() -> None:
    _, tree = guide()
    requirements = find(tree, "Requirements")
    checking = find(tree, "Checking pgvector")
    install = find(tree, "Install")
    assert requirements in install.children
    assert checking in requirements.children
    assert [c.key for c in find(tree, "hrag-pg user guide").children if c.kind == "section"] == [
        "Install",
        "Configuration",
        "Retrieval",
    ]


def test_section_content_is_the_heading_line_and_its_title_the_text_without_hashes() -> None:
    _, tree = guide()
    install = find(tree, "Install")
    assert (install.kind, install.content, install.title) == ("section", "## Install", "Install")
    assert install.metadata["level"] == 2


def test_document_title_is_first_h1_unless_given() -> None:
    _, tree = guide()
    assert tree.title == "hrag-pg user guide"
    assert parse_markdown("# A\n\ntext", "x", title="Given").title == "Given"


def test_with_several_h1s_the_first_heads_only_its_own_part() -> None:
    changelog = "Version 2.14\n============\n\nFixes a crash.\n\n# Version 2.7\n\n- Document the CMake option.\n"
    tree = parse_markdown(changelog, "changelog")
    assert tree.title is None and tree.root.title is None
    doc = prepare_tree(tree, IngestOptions(), collection="c", counter=ApproximateTokenCounter())
    paths = {n.content: n.heading_path for n in doc.nodes if n.kind == "item" or n.kind == "paragraph"}
    assert paths == {"Fixes a crash.": ["Version 2.14"], "- Document the CMake option.": ["Version 2.7"]}


def test_hash_lines_inside_code_fences_are_not_headings() -> None:
    _, tree = guide()
    keys = {node.key for node, _ in tree.root.walk()}
    assert "install from the package index" not in keys
    assert "not a heading either" not in keys
    codes = [leaf for leaf in tree.root.leaves() if leaf.kind == "code"]
    assert len(codes) == 2
    assert codes[0].content.startswith("```bash\n# install")
    assert codes[0].content.endswith("```")
    assert "# not a heading either" in codes[1].content
    assert codes[0].metadata == {"language": "bash"}


def test_each_top_level_list_item_is_one_leaf_with_its_nested_items() -> None:
    _, tree = guide()
    items = [leaf.content for leaf in find(tree, "Requirements").children if leaf.kind == "item"]
    assert items == [
        "- PostgreSQL 14 or newer with pgvector",
        "- Python 3.10+\n  - CPython only; PyPy is untested",
        "- 2 GB of free memory for the embedding model",
    ]


def test_table_is_one_leaf_and_blockquote_is_a_paragraph() -> None:
    _, tree = guide()
    config = find(tree, "Configuration")
    kinds = [child.kind for child in config.children]
    assert kinds == ["table", "paragraph", "item", "item", "item"]
    assert config.children[0].content.count("\n") == 3


def test_text_before_first_heading_hangs_off_root() -> None:
    tree = parse_markdown("Preamble line.\n\n# Title\n\nBody.", "x")
    assert [(c.kind, c.content) for c in tree.root.children] == [
        ("paragraph", "Preamble line."),
        ("section", "# Title"),
    ]


def test_skipped_heading_levels_nest_under_nearest_shallower_heading() -> None:
    tree = parse_markdown("# A\n#### deep\ntext\n## B\nmore", "x")
    assert shape(tree.root) == [
        (0, "document", None),
        (1, "section", "A"),
        (2, "section", "deep"),
        (3, "paragraph", None),
        (2, "section", "B"),
        (3, "paragraph", None),
    ]


def test_duplicate_sibling_headings_get_distinct_keys() -> None:
    tree = parse_markdown("# Doc\n## Example\none\n## Example\ntwo", "x")
    assert [c.key for c in tree.root.children[0].children] == ["Example", "Example (2)"]


def test_heading_parsing_rules() -> None:
    assert heading_of("## Install ##") == (2, "Install")
    assert heading_of("#hashtag") is None
    assert heading_of("####### seven") is None
    assert heading_of("    # indented code") is None


def test_guide_text_is_preserved_and_leaves_nonempty() -> None:
    text, tree = guide()
    assert_text_preserved(text, tree)
    assert_leaves_nonempty(tree)


_words = st.text(alphabet="abcxyz日本語の規則。、 .,-*>|`~0123456789", min_size=1, max_size=40)
_heading = st.builds(
    lambda level, text: "#" * level + " " + text,
    st.integers(1, 6),
    st.text(alphabet="abc 日本", min_size=1, max_size=10),
)
_setext = st.builds(
    lambda text, mark, width: f"{text}\n{mark * width}",
    st.text(alphabet="abc 日本", min_size=1, max_size=10),
    st.sampled_from("=-"),
    st.integers(1, 5),
)
_fence = st.builds(lambda body: f"```\n# {body}\n```", st.text(alphabet="abc #", max_size=10))
_comment = st.builds(lambda body: f"<!-- {body} -->", st.text(alphabet="ab -\n#", max_size=12))
_definition = st.builds(lambda label: f"[{label}]: #{label}", st.text(alphabet="ab `", min_size=1, max_size=6))
_block = st.one_of(_heading, _setext, _words, _fence, st.builds(lambda w: f"- {w}", _words), _comment, _definition)


@settings(max_examples=150, deadline=None)
@given(st.lists(_block, min_size=1, max_size=12), st.sampled_from(["\n", "\n\n"]))
def test_random_markdown_preserves_text_and_has_no_empty_leaves(
    blocks: list[str], sep: str
) -> None:
    text = sep.join(blocks)
    tree = parse_markdown(text, "random.md")
    assert_text_preserved(text, tree)
    for leaf in tree.root.leaves():
        assert leaf is tree.root or leaf.content.strip()


def test_a_fence_indented_deep_inside_a_list_item_is_kept_in_the_item() -> None:
    text = (
        "# T\n\n1. Run this:\n\n        ```\n        # not a heading\n        pg_upgrade -b old\n"
        "        ```\n\n2. Then this.\n"
    )
    tree = parse_markdown(text, "upgrade.md")
    items = [n for n, _ in tree.root.walk() if n.kind == "item"]
    assert len(items) == 2
    assert "# not a heading" in items[0].content
    assert not any(n.kind == "section" and "not a heading" in (n.title or "") for n, _ in tree.root.walk())


def test_a_bare_hash_line_is_kept_as_text_not_dropped() -> None:
    tree = parse_markdown("Intro.\n\n#\n\nAfter.", "x")
    assert [(c.kind, c.content) for c in tree.root.children] == [
        ("paragraph", "Intro."), ("paragraph", "#"), ("paragraph", "After.")]
    assert tree.root.full_text() == "Intro.\n\n#\n\nAfter."


def test_blank_lines_between_blocks_are_kept_as_separators() -> None:
    text = "# T\n\n\nOne.\n \nTwo.\n```\ncode\n```"
    tree = parse_markdown(text, "x")
    assert [(n.separator, n.content) for n, _ in tree.root.walk() if n.content][1:] == [
        ("\n\n\n", "One."), ("\n \n", "Two."), ("\n", "```\ncode\n```")]
    assert tree.root.full_text() == text


# -- setext headings (a paragraph underlined with === or ---) ---------------------------------------

_SETEXT_GUIDE = (
    "BUG REPORTS\n===========\n\nHow to report.\n\n\n"
    "Where to send\n-------------\nThe issue tracker.\n\n"
    "### Mail\n\nThe list.\n\n"
    "What to send\n------------\nA stack trace.\n\n"
    "Appendix\n========\n\nEnd.\n"
)


def test_setext_headings_open_sections_by_level_mixed_with_atx_headings() -> None:
    tree = parse_markdown(_SETEXT_GUIDE, "bugs.md")
    assert shape(tree.root) == [
        (0, "document", None),
        (1, "section", "BUG REPORTS"),
        (2, "paragraph", None),
        (2, "section", "Where to send"),
        (3, "paragraph", None),
        (3, "section", "Mail"),
        (4, "paragraph", None),
        (2, "section", "What to send"),
        (3, "paragraph", None),
        (1, "section", "Appendix"),
        (2, "paragraph", None),
    ]
    where = find(tree, "Where to send")
    assert (where.content, where.title, where.metadata["level"]) == (
        "Where to send\n-------------", "Where to send", 2)
    assert find(tree, "BUG REPORTS").metadata["level"] == 1


def test_setext_heading_text_and_separators_keep_the_document_byte_for_byte() -> None:
    tree = parse_markdown(_SETEXT_GUIDE, "bugs.md")
    assert_text_preserved(_SETEXT_GUIDE, tree)
    assert_leaves_nonempty(tree)
    assert tree.root.full_text() == _SETEXT_GUIDE.strip()
    where = find(tree, "Where to send")
    assert (where.separator, where.content) == ("\n\n\n", "Where to send\n-------------")


def test_an_underlined_multi_line_paragraph_is_one_heading_titled_by_its_lines_joined() -> None:
    text = "# Doc\n\nWhere to send\n   bug reports  \n---\nThe tracker.\n\nOne\n-\nTwo."
    tree = parse_markdown(text, "x")
    heading = find(tree, "Where to send bug reports")
    assert (heading.kind, heading.content, heading.metadata["level"]) == (
        "section", "Where to send\n   bug reports  \n---", 2)
    assert [c.content for c in heading.children] == ["The tracker."]
    assert find(tree, "One").content == "One\n-"  # a one-dash underline, not an empty list item
    assert tree.root.full_text() == text


def test_first_setext_h1_titles_the_document() -> None:
    tree = parse_markdown("Preface.\n\nBUG REPORTS\n===========\n\n## Later\n\ntext", "bugs.md")
    assert tree.title == "BUG REPORTS"
    assert tree.root.title == "BUG REPORTS"


def test_indented_code_over_a_dash_rule_under_a_setext_heading_stays_a_paragraph() -> None:
    text = "Output\n------\n\n    count\n-------\n        3\n    (1 row)\n\nDone."
    tree = parse_markdown(text, "psql.md")
    assert shape(tree.root) == [
        (0, "document", None),
        (1, "section", "Output"),
        (2, "paragraph", None),
        (2, "paragraph", None),
    ]
    assert find(tree, "Output").children[0].content == "    count\n-------\n        3\n    (1 row)"
    assert tree.root.full_text() == text


def test_front_matter_between_dash_lines_stays_text_before_a_setext_title() -> None:
    text = "---\ntitle: x\n---\n\nManual\n======\n\nBody."
    tree = parse_markdown(text, "x")
    assert [(c.kind, c.content) for c in tree.root.children] == [
        ("paragraph", "---\ntitle: x\n---"), ("section", "Manual\n======")]
    assert tree.title == "Manual"
    assert tree.root.full_text() == text


def test_dashes_after_a_list_item_a_quote_or_a_blank_line_are_not_headings() -> None:
    text = "Setup\n=====\n\n- an item\n---\n\n> a quote\n---\n\nText.\n\n---\nmore"
    tree = parse_markdown(text, "x")
    setup = find(tree, "Setup")
    assert [(c.kind, c.content) for c in setup.children] == [
        ("item", "- an item\n---"), ("paragraph", "> a quote\n---"), ("paragraph", "Text."),
        ("paragraph", "---\nmore")]
    assert [n.key for n, _ in tree.root.walk() if n.kind == "section"] == ["Setup"]


# -- HTML comments ----------------------------------------------------------------------------------

_NODE_DOC = (
    "# Events\n\n"
    "<!--introduced_in=v0.10.0-->\n\n> Stability: 2 - Stable\n\n"
    "## `emitter.on(eventName, listener)`\n\n"
    "<!-- YAML\nadded: v0.1.26\nchanges:\n  - version:\n     - v13.4.0\n     - v12.16.0\n"
    "    description: Added captureRejections option.\n-->\n\n"
    "* `eventName` {string|symbol} The name of the event.\n\n"
    "Adds the `listener` function.\n\n"
    "## `emitter.off()`\n\n<!-- YAML\nadded: v10.0.0\n-->\n"
)


def test_an_html_comment_is_one_leaf_however_its_lines_look() -> None:
    tree = parse_markdown(_NODE_DOC, "events.md")
    assert_text_preserved(_NODE_DOC, tree)
    assert tree.root.full_text() == _NODE_DOC.rstrip("\n")  # (the reader drops the final newline)
    on = find(tree, "`emitter.on(eventName, listener)`")
    assert [(c.kind, c.content.splitlines()[0]) for c in on.children] == [
        ("paragraph", "<!-- YAML"),
        ("item", "* `eventName` {string|symbol} The name of the event."),
        ("paragraph", "Adds the `listener` function."),
    ]
    assert on.children[0].content.endswith("    description: Added captureRejections option.\n-->")
    assert [c.content for c in find(tree, "Events").children[:2]] == [
        "<!--introduced_in=v0.10.0-->", "> Stability: 2 - Stable"]
    assert [c.content for c in find(tree, "`emitter.off()`").children] == ["<!-- YAML\nadded: v10.0.0\n-->"]


def test_a_comment_interrupts_a_paragraph_and_an_unclosed_one_runs_to_the_end() -> None:
    text = "<!-- a\n# not a heading\n- nor an item -->\nIntro.\n\n# Next\n\nBody.\n<!-- unclosed\n\n# still it"
    tree = parse_markdown(text, "x.md")
    assert tree.root.full_text() == text
    assert [(c.kind, c.content) for c in tree.root.children[:2]] == [
        ("paragraph", "<!-- a\n# not a heading\n- nor an item -->"), ("paragraph", "Intro.")]
    assert [c.content for c in find(tree, "Next").children] == ["Body.", "<!-- unclosed\n\n# still it"]


_LINKED_DOC = (
    "[spec]: https://spec.commonmark.org\n\n"
    "# Timers\n\n"
    "Use [`setTimeout()`][] or see [the spec][spec].\n\n"
    "[`setTimeout()`]: #settimeoutcallback-delay-args\n"
    "[spec]: https://spec.commonmark.org \"CommonMark\"\n\n"
    "## `setTimeout(callback[, delay])`\n\n"
    "When `delay` is larger than `2147483647`, it is set to `1`.\n\n"
    "[`clearTimeout()`]: #cleartimeouttimeout\n"
    "[`setInterval()`]:\n"
    "  <#setintervalcallback-delay-args>\n"
    "  'the title on its own line'\n"
    "[DEP0126]: deprecations.md#DEP0126\n"
)


def test_link_reference_definitions_are_markup_kept_out_of_every_searched_leaf() -> None:
    tree = parse_markdown(_LINKED_DOC, "timers.md")
    assert tree.root.full_text() == _LINKED_DOC.rstrip("\n")
    # between two nodes: the next node's separator (here the heading's)
    call = find(tree, "`setTimeout(callback[, delay])`")
    assert call.separator == ("\n\n[`setTimeout()`]: #settimeoutcallback-delay-args\n"
                              "[spec]: https://spec.commonmark.org \"CommonMark\"\n\n")
    # before the first node and after the last: markup leaves, the last one of the root (not of
    # the last section, which is returned as context without them)
    first, last = tree.root.children[0], tree.root.children[-1]
    assert (first.kind, first.content) == (MARKUP_KIND, "[spec]: https://spec.commonmark.org")
    assert last.kind == MARKUP_KIND and last.content.startswith("[`clearTimeout()`]:")
    assert last.content.endswith("[DEP0126]: deprecations.md#DEP0126")
    assert [c.content for c in call.children] == ["When `delay` is larger than `2147483647`, it is set to `1`."]
    flat = prepare_tree(tree, IngestOptions(), counter=ApproximateTokenCounter())
    assert [(n.kind, n.embed_text) for n in flat.nodes if n.kind == MARKUP_KIND] == [(MARKUP_KIND, None)] * 2
    assert not any("]: " in n.embed_text for n in flat.search_targets)


def test_lines_that_only_look_like_link_definitions_stay_text() -> None:
    text = ("[Note]: read the whole page first.\n\n[^1]: Ibid.\n\n[^2]: https://example.org/paper.pdf\n\n"
            "A paragraph\n[x]: https://example.org inside it is part of it.\n\n    [indented]: code\n\n"
            "[ ]: blank-label\n\n[no-destination]:\n\n[a]: /url \"its title\"\n(a paragraph, not a second title)")
    tree = parse_markdown(text, "x.md")
    assert tree.root.full_text() == text
    assert [(c.kind, c.content) for c in tree.root.children] == [
        ("paragraph", "[Note]: read the whole page first."), ("paragraph", "[^1]: Ibid."),
        ("paragraph", "[^2]: https://example.org/paper.pdf"),
        ("paragraph", "A paragraph\n[x]: https://example.org inside it is part of it."),
        ("paragraph", "    [indented]: code"), ("paragraph", "[ ]: blank-label"), ("paragraph", "[no-destination]:"),
        ("paragraph", "(a paragraph, not a second title)")]
    assert tree.root.children[-1].separator == '\n\n[a]: /url "its title"\n'  # the one definition


def test_myst_targets_and_navigation_fences_are_markup_like_their_rst_forms() -> None:
    text = ("(install)=\n\n# Install\n\n```{toctree}\n:hidden:\ncli/index\n```\n\n"
            "```{note}\nA note is content.\n```\n\n(next)=\n## Next\n\nSee (a)= in text.")
    tree = parse_markdown(text, "index.md")
    assert tree.root.full_text() == text
    assert (tree.root.children[0].kind, tree.root.children[0].content) == (MARKUP_KIND, "(install)=")
    install = find(tree, "Install")
    assert [c.content for c in install.children if c.kind != "section"] == [
        "```{note}\nA note is content.\n```"]
    assert install.children[0].separator == "\n\n```{toctree}\n:hidden:\ncli/index\n```\n\n"
    assert find(tree, "Next").separator == "\n\n(next)=\n"
    assert [c.content for c in find(tree, "Next").children] == ["See (a)= in text."]


def test_an_unclosed_navigation_fence_stays_searched_code() -> None:
    # (it runs to the end of the file: read as markup, it would hide the sections after it)
    text = "# T\n\n```{toctree}\nindex\n\n## Real section\n\nImportant content."
    tree = parse_markdown(text, "x.md")
    assert [(c.kind, c.content) for c in find(tree, "T").children] == [
        ("paragraph", "```{toctree}\nindex\n\n## Real section\n\nImportant content.")]


def test_myst_directive_fences_are_code_or_prose_as_their_rst_forms() -> None:
    text = ("# T\n\n```{note}\nA note. It has two sentences.\n```\n\n"
            "```{code-block} python\nx = 1\n```\n\n```{versionadded} 22.1\nThe flag.\n```")
    tree = parse_markdown(text, "x.md")
    assert tree.root.full_text() == text
    assert [(c.kind, c.metadata) for c in find(tree, "T").children] == [
        ("paragraph", {"directive": "note"}), ("code", {"language": "python"}),
        ("paragraph", {"directive": "versionadded"})]
