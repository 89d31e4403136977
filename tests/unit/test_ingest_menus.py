"""Menus and tables of contents are text, not search targets (issue 40, item 2b).

A list whose items are only links or cross-references (a README's table of
contents, a Sphinx page's list of ``:doc:`` references, texinfo's ``* Menu:``
blocks and its HTML ``section-toc`` lists and ``table.menu``) names what
other nodes hold: embedded, "Thread Safety" under a chapter's heading path
outranked the section that answers.  Such a list is one block, stored in
place but not embedded; a page that holds nothing else keeps it as one
search target.
"""

from __future__ import annotations

from hrag_pg.ingest.flatten import FlatDocument
from hrag_pg.ingest.html import parse_html
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pipeline import IngestOptions, prepare_tree
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tokens import ApproximateTokenCounter
from hrag_pg.ingest.tree import MARKUP_KIND, DocumentTree

COUNTER = ApproximateTokenCounter()


def _prepare(tree: DocumentTree) -> FlatDocument:
    return prepare_tree(tree, IngestOptions(), counter=COUNTER)


def _rows_text(doc: FlatDocument) -> str:
    """``hrag.node_text`` of the root, from the rows (see tests/reliability/roundtrip_cases.py)."""
    out: list[str] = []
    for node in doc.nodes:
        if node.content:
            out.extend([node.separator, node.content] if out else [node.content])
    return "".join(out)


def _targets(doc: FlatDocument) -> list[str]:
    return [n.content for n in doc.search_targets]


def _markup(doc: FlatDocument) -> list[str]:
    return [n.content for n in doc.nodes if n.kind == MARKUP_KIND]


README = """# Tool

Tool converts files between formats.

- [Install](#install)
- [Usage](#usage)
  - [Options](#options)
- [Bugs][bugs]

## Install

Run the installer as root.

## Usage

Give it a file name.

[bugs]: https://example.org/bugs
"""


def test_a_markdown_list_of_links_is_a_menu_stored_but_not_searched() -> None:
    tree = parse_markdown(README, "README.md")
    doc = _prepare(tree)
    assert _rows_text(doc) == README.strip()
    assert _targets(doc) == ["Tool converts files between formats.", "Run the installer as root.",
                             "Give it a file name."]
    assert _markup(doc)[0] == "- [Install](#install)\n- [Usage](#usage)\n  - [Options](#options)\n- [Bugs][bugs]"
    menu = next(n for n in doc.nodes if n.kind == MARKUP_KIND)
    assert menu.metadata["source_kind"] == "menu" and menu.heading_path == ["Tool"]


def test_a_list_item_with_words_besides_its_link_stays_a_search_target() -> None:
    text = ("# Tool\n\nSee also:\n\n- [Install](#install) explains the packages.\n- [Usage](#usage)\n\n"
            "- [x] a task, not a link\n- <not a link>\n")
    doc = _prepare(parse_markdown(text, "x.md"))
    assert _targets(doc) == ["See also:\n\n- [Install](#install) explains the packages.", "- [Usage](#usage)",
                             "- [x] a task, not a link", "- <not a link>"]
    assert _markup(doc) == []


TEXINFO_TOP = """File: tool.info,  Node: Top,  Next: Overview,  Up: (dir)

Tool
****

This manual is for Tool, version 1.0.

* Menu:

* Overview::                    What Tool is.
* Invoking tool::               Command line options.
* Thread safety: Threads.       Rules for threads.

File: tool.info,  Node: Overview,  Next: Invoking tool,  Prev: Top,  Up: Top

Tool converts files between formats and keeps their dates.
"""


def test_a_texinfo_menu_in_plain_text_is_one_block_not_searched() -> None:
    doc = _prepare(parse_markdown(TEXINFO_TOP, "tool.info", plain_headings=True))
    assert _rows_text(doc) == TEXINFO_TOP.strip()
    assert _markup(doc) == [
        "* Menu:\n\n* Overview::                    What Tool is.\n"
        "* Invoking tool::               Command line options.\n"
        "* Thread safety: Threads.       Rules for threads."]
    assert not any("Overview::" in t for t in _targets(doc))
    # a list item that merely starts like an entry ("* Note: ...") is no menu entry
    note = _prepare(parse_markdown("Tool\n\nIntro text here.\n\n* Note: read this first.\n* Keep: the dates.\n",
                                   "NOTES", plain_headings=True))
    assert _markup(note) == []


RST = """Tool
====

Tool converts files between formats.

- :doc:`install`
- :ref:`usage <usage-label>`
- `Bug tracker <https://example.org/bugs>`_

Install
-------

Run the installer as root.
"""


def test_an_rst_list_of_cross_references_is_a_menu() -> None:
    doc = _prepare(parse_rst(RST, "index.rst"))
    assert _rows_text(doc) == RST.strip()
    assert _markup(doc) == ["- :doc:`install`\n- :ref:`usage <usage-label>`\n"
                            "- `Bug tracker <https://example.org/bugs>`_"]
    assert _targets(doc) == ["Tool converts files between formats.", "Run the installer as root."]


# The shape of libffi's texinfo HTML (Debian: /usr/share/doc/libffi8/html/): a chapter page is its
# heading and a list of links to its sections; makeinfo 6 writes menus as table.menu.
CHAPTER_PAGE = ('<html><head><meta name="Generator" content="makeinfo"><title>Using libffi</title></head><body>'
                '<h2 class="chapter">2 Using libffi</h2>'
                '<ul class="section-toc"><li><a href="The-Basics.html">The Basics</a></li>'
                '<li><a href="Types.html">Types</a></li><li><a href="Thread-Safety.html">Thread Safety</a></li>'
                '</ul></body></html>')
MANUAL_PAGE = ('<html><head><meta name="Generator" content="makeinfo"></head><body>'
               '<h1>Tool</h1><p>This manual is for Tool.</p>'
               '<table class="menu" border="0"><tr><td>&bull; <a href="#Overview">Overview</a></td>'
               '<td>&nbsp;&nbsp;</td><td>What Tool is.</td></tr>'
               '<tr><td>&bull; <a href="#Threads">Threads</a></td><td></td><td>Rules for threads.</td></tr></table>'
               '<h2>1 Overview</h2><p>Tool converts files.</p>'
               '<ul><li><a href="a.html">Formats</a></li><li><a href="d.html">Dates</a></li></ul>'
               '<p>It keeps dates.</p>'
               '<ul><li><a href="a.html">Formats</a></li><li>Dates are kept, see <a href="d.html">dates</a>.</li></ul>'
               '</body></html>')


def test_html_lists_of_links_and_texinfo_menus_are_not_searched() -> None:
    tree = parse_html(MANUAL_PAGE, "tool.html")
    text = tree.root.full_text()
    doc = _prepare(tree)
    assert _rows_text(doc) == text
    assert _targets(doc) == ["This manual is for Tool.", "Tool converts files.", "It keeps dates.", "Formats",
                             "Dates are kept, see dates."]
    assert _markup(doc) == ["• Overview | \xa0\xa0 | What Tool is.\n• Threads |  | Rules for threads.",
                            "Formats\n\nDates"]
    assert [n.metadata for n in doc.nodes if n.kind == MARKUP_KIND] == [
        {"menu": "table.menu", "source_kind": "menu"}, {"source_kind": "menu"}]


def test_a_page_that_is_only_a_menu_keeps_it_as_one_search_target() -> None:
    tree = parse_html(CHAPTER_PAGE, "Using-libffi.html")
    text = tree.root.full_text()
    doc = _prepare(tree)
    assert _rows_text(doc) == text
    # one child for the whole list, not one per link: "Thread Safety" alone under the
    # chapter's heading path looked like the answer to "Is libffi thread safe?"
    assert [(n.kind, n.content) for n in doc.search_targets] == [("menu", "The Basics\n\nTypes\n\nThread Safety")]
    assert _markup(doc) == []


def test_a_list_of_links_after_a_lead_in_is_the_lead_ins_content() -> None:
    # (libxmlsec1's README.md): the links name what the sentence asks for, so the two are one child
    text = ("# Tool\n\nTool converts files between formats.\n\nTool requires the following libraries:\n\n"
            "- [libxml2](https://example.org/libxml2)\n- [zlib](https://example.org/zlib)\n\n"
            "## Install\n\nRun the installer as root.\n")
    doc = _prepare(parse_markdown(text, "README.md"))
    assert _rows_text(doc) == text.strip()
    assert _markup(doc) == []
    assert _targets(doc) == ["Tool converts files between formats.",
                             "Tool requires the following libraries:\n\n- [libxml2](https://example.org/libxml2)\n"
                             "- [zlib](https://example.org/zlib)",
                             "Run the installer as root."]


def test_the_titles_between_a_texinfo_menus_entries_belong_to_the_menu() -> None:
    # the Top node's "detailed node listing": chapter titles between groups of entries
    text = ("Tool\n\nThis manual is for Tool, version 1.0.\n\n* Menu:\n\n* Overview::\n* Invoking::\n\n"
            " -- The Detailed Node Listing --\n\nInvoking\n\n* Options::\n* Exit status::\n\n"
            "1 Overview\n==========\n\nTool converts files between formats and keeps their dates.\n")
    doc = _prepare(parse_markdown(text, "tool.info", plain_headings=True))
    assert _rows_text(doc) == text.strip()
    assert _markup(doc) == ["* Menu:\n\n* Overview::\n* Invoking::\n\n -- The Detailed Node Listing --\n\nInvoking\n\n"
                            "* Options::\n* Exit status::"]


def test_a_list_with_one_item_that_says_more_than_its_link_is_no_menu() -> None:
    # (libtasn1's README.md): the tools a build needs, one of them with a version; every item counts
    text = ("# Tool\n\n## Building\n\nBuilding needs these tools.\n\n* [Make](https://example.org/make)\n"
            "* [Automake](https://example.org/automake) (use 1.11.3 or later)\n* [Autoconf](https://example.org/ac)\n\n"
            "Then run make.\n")
    doc = _prepare(parse_markdown(text, "README.md"))
    assert _markup(doc) == []
    assert "* [Autoconf](https://example.org/ac)" in _targets(doc)
    html = ('<h1>Tool</h1><p>Building needs these tools.</p><ul><li><a href="m">Make</a></li>'
            '<li><a href="a">Automake</a> (use 1.11.3 or later)</li><li><a href="c">Autoconf</a></li></ul>')
    assert _markup(_prepare(parse_html(html, "tool.html"))) == []
