from __future__ import annotations

import re

from hrag_pg.ingest.html import parse_html

from .ingest_checks import FIXTURES, assert_leaves_nonempty, find, shape


def page():
    return parse_html((FIXTURES / "page.html").read_text(encoding="utf-8"), "page.html")


def test_h1_to_h3_build_the_same_tree_shape_as_markdown() -> None:
    tree = page()
    assert [(d, k, key) for d, k, key in shape(tree.root) if k in ("document", "section")] == [
        (0, "document", None),
        (1, "section", "Travel expenses"),
        (2, "section", "Transport"),
        (3, "section", "Mileage"),
        (2, "section", "Meals"),
    ]


def test_paragraphs_items_tables_quotes_and_pre_become_leaves() -> None:
    tree = page()
    transport = find(tree, "Transport")
    assert [c.kind for c in transport.children] == ["paragraph", "item", "item", "section"]
    assert (
        transport.children[0].content == "Economy class is reimbursed for flights under six hours."
    )
    assert transport.children[2].content == (
        "Taxis: only when no public transport runs\nafter 23:00\nwith luggage over 20 kg"
    )
    meals = find(tree, "Meals")
    assert [c.kind for c in meals.children] == ["table", "paragraph", "code"]
    assert (
        meals.children[0].content
        == "Country | Daily allowance\nGermany | 28 EUR\nJapan | 4,500 JPY"
    )
    assert meals.children[2].content == "claim = submit(receipts)\n# keep the original receipts"


def test_script_style_nav_and_head_are_not_content() -> None:
    text = page().root.full_text()
    for hidden in ("tracking code", "font-family", "Home", "not content", "Travel expense policy"):
        assert hidden not in text
    assert "0.30 EUR per km & parking" in text  # entities decoded


def test_title_tag_used_when_there_is_no_h1() -> None:
    tree = parse_html(
        "<html><head><title>Only title</title></head><body><p>x</p></body></html>", "x"
    )
    assert tree.title == "Only title"
    assert page().title == "Travel expenses"


def test_with_several_h1s_the_title_tag_titles_the_page() -> None:
    tree = parse_html("<title>Release notes</title><h1>2.14</h1><p>a</p><h1>2.13</h1><p>b</p>", "x")
    assert tree.title == "Release notes"


def test_unclosed_paragraphs_and_list_items_are_separate_leaves() -> None:
    tree = parse_html("<h2>S</h2><p>one<p>two<ul><li>a<li>b</ul>tail", "x")
    assert [(c.kind, c.content) for c in tree.root.children[0].children] == [
        ("paragraph", "one"),
        ("paragraph", "two"),
        ("item", "a"),
        ("item", "b"),
        ("paragraph", "tail"),
    ]


def test_unclosed_head_does_not_hide_the_body() -> None:
    tree = parse_html("<head><title>T</title><body><p>visible</p>", "x")
    assert tree.root.full_text() == "visible"


def test_all_visible_words_are_kept() -> None:
    tree = page()
    assert_leaves_nonempty(tree)
    words = set(re.findall(r"\w+", tree.root.full_text()))
    for word in ("reimburses", "Trains", "luggage", "Mileage", "Germany", "Receipts", "receipts"):
        assert word in words


def test_a_definition_term_heads_a_section_of_its_definition() -> None:
    # DocBook's variable lists (Debian's users-and-groups page): the term names
    # what its definition is about, so every leaf under it carries it.
    tree = parse_html(
        "<h2>Users</h2><dl>"
        "<dt>games</dt><dd><p>Many games are sgid to games.</p><p>See Policy.</p></dd>"
        "<dt>nobody</dt><dt>nogroup</dt><dd>Daemons that need not own files.</dd>"
        "</dl><p>Some users have no group.</p>",
        "x",
    )
    assert shape(tree.root) == [
        (0, "document", None),
        (1, "section", "Users"),
        (2, "section", "games"),
        (3, "paragraph", None),
        (3, "paragraph", None),
        (2, "section", "nobody / nogroup"),
        (3, "paragraph", None),
        (2, "paragraph", None),
    ]
    assert find(tree, "games").children[0].content == "Many games are sgid to games."
    users = find(tree, "Users")
    assert users.children[-1].content == "Some users have no group."


def test_a_definition_list_inside_a_definition_nests_one_level_deeper() -> None:
    tree = parse_html(
        "<h1>API</h1><dl><dt>dumps(obj)</dt><dd><p>Serialize obj.</p>"
        "<dl><dt>indent</dt><dd>Pretty-print.</dd></dl><p>Returns a str.</p></dd>"
        "<dt>loads(s)</dt><dd>Parse s.</dd></dl>",
        "x",
    )
    assert [(d, k, key) for d, k, key in shape(tree.root) if k == "section"] == [
        (1, "section", "API"),
        (2, "section", "dumps(obj)"),
        (3, "section", "indent"),
        (2, "section", "loads(s)"),
    ]
    assert [c.content for c in find(tree, "dumps(obj)").children if c.is_leaf] == [
        "Serialize obj.",
        "Returns a str.",
    ]


def test_terms_without_definitions_stay_one_paragraph() -> None:
    # a table of contents written as a <dl> of links
    tree = parse_html("<h1>Guide</h1><dl><dt>1. Intro</dt><dt>2. Usage</dt></dl><p>Text.</p>", "x")
    assert [(c.kind, c.content) for c in tree.root.children[0].children] == [
        ("paragraph", "1. Intro\n2. Usage"),
        ("paragraph", "Text."),
    ]


def test_navigation_landmarks_and_heading_permalinks_are_not_content() -> None:
    # Sphinx: a "related" bar and a sidebar with role="navigation", and a "¶"
    # permalink in every heading and API term; texinfo: a copiable anchor.
    tree = parse_html(
        '<div class="related" role="navigation"><h3>Navigation</h3><ul><li>next</li></ul></div>'
        '<div class="body"><h1>Policy<a class="headerlink" href="#p">¶</a></h1><p>Body.</p>'
        '<dl><dt id="f">f(x)<a class="copiable-anchor" href="#f"> &para;</a></dt><dd>Does f.</dd></dl></div>'
        '<div class="sphinxsidebar" role="navigation"><div><h3>Quick search</h3></div></div><p>Footer.</p>',
        "x",
    )
    assert [key for _, kind, key in shape(tree.root) if kind == "section"] == ["Policy", "f(x)"]
    text = tree.root.full_text()
    assert "¶" not in text and "next" not in text and "Quick search" not in text
    assert "Footer." in text  # what follows a skipped landmark is content again


def test_an_unclosed_navigation_landmark_does_not_hide_the_rest_of_the_page() -> None:
    tree = parse_html('<body><div role="navigation"><p>menu</body><p>after</p>', "x")
    assert "after" in tree.root.full_text()


def test_docbook_navigation_bars_and_table_of_contents_are_not_content() -> None:
    # DocBook XSL (valgrind's, PostgreSQL's and many GNU manuals): a header and
    # footer bar of tables, and a table of contents as a <dl> of section titles
    # that must not open sections named like the real ones.
    tree = parse_html(
        '<div class="navheader"><table><tr><td>Prev</td><td>Up</td></tr></table></div>'
        '<div class="chapter"><h1>2. Using the core</h1>'
        '<div class="toc"><p><b>Table of Contents</b></p><dl class="toc">'
        '<dt><span class="sect1"><a href="#a">2.1. What it does</a></span></dt>'
        '<dd><dl><dt><a href="#b">2.1.1. Details</a></dt></dl></dd></dl></div>'
        '<h2>2.1. What it does</h2><p>It checks memory.</p>'
        '<div class="sidebar"><p>A boxed aside is content.</p></div></div>'
        '<table class="nav"><tr><td>&lt;&lt; 1. Introduction</td><td>Home</td></tr></table>'
        '<div class="navfooter"><p>Next: 3. Advanced topics</p></div>',
        "x",
    )
    assert [key for _, kind, key in shape(tree.root) if kind == "section"] == [
        "2. Using the core",
        "2.1. What it does",
    ]
    text = tree.root.full_text()
    assert "Table of Contents" not in text and "Prev" not in text and "Introduction" not in text
    assert "Next:" not in text and "2.1.1. Details" not in text
    assert "It checks memory." in text and "A boxed aside is content." in text


def test_texinfo_navigation_bars_are_not_content() -> None:
    body = ('<div class="{cls}"><p>Next: <a href="n.html">Multiple ABIs</a>, Up: Using libffi</p></div>'
            '<h3>2.3 Types</h3><p>Every type has a descriptor.</p>')
    makeinfo_6 = parse_html('<head><meta name="Generator" content="makeinfo"></head>' + body.format(cls="header"), "x")
    makeinfo_7 = parse_html(body.format(cls="nav-panel"), "x")
    for tree in (makeinfo_6, makeinfo_7):
        assert "Next:" not in tree.root.full_text()
        assert "Every type has a descriptor." in tree.root.full_text()
    # another generator's div.header is content: only makeinfo's is its navigation bar
    assert "Next:" in parse_html(body.format(cls="header"), "x").root.full_text()


def test_a_page_that_is_only_navigation_keeps_it_as_its_content() -> None:
    # a book's index page: its table of contents is all there is to ingest
    tree = parse_html(
        '<nav><a class="headerlink">¶</a><ul><li>Chapter 1</li></ul></nav>'
        '<div class="toc"><dl><dt>1. Introduction</dt><dt>2. Using the core</dt></dl></div>',
        "x",
    )
    text = tree.root.full_text()
    assert "Chapter 1" in text and "1. Introduction" in text and "2. Using the core" in text
    assert "¶" not in text
    assert_leaves_nonempty(tree)


def test_publican_navigation_lists_are_not_content() -> None:
    # the Debian handbook (Publican): "Prev", the book's title and "Next" in ul.docnav, top and bottom
    tree = parse_html(
        '<ul class="docnav top"><li class="previous"><a href="p.html"><strong>Prev</strong></a></li>'
        '<li class="home">The Handbook</li><li class="next"><a href="n.html"><strong>Next</strong></a></li></ul>'
        '<h1>A. Derivative Distributions</h1><p>Many distributions derive from Debian.</p>'
        '<ul class="docnav"><li class="up"><a href="#"><strong>Up</strong></a></li></ul>',
        "x",
    )
    text = tree.root.full_text()
    assert "Prev" not in text and "Next" not in text and "Up" not in text and "The Handbook" not in text
    assert "Many distributions derive from Debian." in text
