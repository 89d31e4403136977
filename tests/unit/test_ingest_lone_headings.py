"""A heading alone does not outrank its section's content (issue 40, item 2c).

Search targets embed their heading path, so a section's content already
carries its heading.  A heading with nothing under it (the next heading
follows at once: a document title written one level too deep, texinfo's
subsection heading over its first subsubsection, an empty section) was a
search target of its own, a few words whose rare identifier could outrank
the section that answers.  It is stored in place as markup, not searched.
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


def _prepare(tree: DocumentTree, **options: object) -> FlatDocument:
    return prepare_tree(tree, IngestOptions(**options), counter=COUNTER)  # type: ignore[arg-type]


def _rows_text(doc: FlatDocument) -> str:
    out: list[str] = []
    for node in doc.nodes:
        if node.content:
            out.extend([node.separator, node.content] if out else [node.content])
    return "".join(out)


def _targets(doc: FlatDocument) -> list[str]:
    return [n.content for n in doc.search_targets]


# The shape of openssh's README.Debian (a title underlined one level deeper than its sections)
# and of Git's release notes (an empty section).
NOTES = """Tool for Debian
---------------

Upgrade issues
==============

Backward compatibility notes
----------------------------

Updates since v2.9
------------------

The `parse_datetime` option reads ISO dates.
"""


def test_a_heading_with_nothing_under_it_is_not_a_search_target() -> None:
    doc = _prepare(parse_markdown(NOTES, "README.Debian", plain_headings=True))
    assert _rows_text(doc) == NOTES.strip()
    assert _targets(doc) == ["The `parse_datetime` option reads ISO dates."]
    lone = [(n.kind, n.title, n.metadata.get("source_kind")) for n in doc.nodes if n.kind == MARKUP_KIND]
    assert lone == [(MARKUP_KIND, "Tool for Debian", "section"),
                    (MARKUP_KIND, "Backward compatibility notes", "section")]
    # the heading path of what follows is unchanged
    assert doc.search_targets[0].heading_path == ["Upgrade issues", "Updates since v2.9"]


def test_an_html_heading_over_a_sibling_heading_is_not_a_search_target() -> None:
    # texinfo 6 writes a subsection and its subsubsections with the same <h4> (nettle's manual)
    page = ("<h3>7.1 Hash functions</h3><p>Hashes digest messages.</p>"
            "<h4>7.1.2 Miscellaneous hash functions</h4>"
            "<h4>7.1.2.1 STREEBOG512</h4><p>STREEBOG512 outputs 512 bits.</p>")
    tree = parse_html(page, "nettle.html")
    text = tree.root.full_text()
    doc = _prepare(tree)
    assert _rows_text(doc) == text
    assert _targets(doc) == ["Hashes digest messages.", "STREEBOG512 outputs 512 bits."]


def test_an_rst_title_with_nothing_under_it_is_not_a_search_target() -> None:
    text = "Tool\n====\n\nChangelog\n---------\n\nVersion 2\n---------\n\nDates are kept.\n"
    doc = _prepare(parse_rst(text, "CHANGES.rst"))
    assert _rows_text(doc) == text.strip()
    assert _targets(doc) == ["Dates are kept."]


def test_a_document_of_headings_alone_keeps_them_searchable() -> None:
    # nothing else to search: refusing the document would lose its only text
    doc = _prepare(parse_markdown("# Tool\n\n## Install\n\n## Usage\n", "TODO.md"))
    assert [n.title for n in doc.search_targets] == ["Install", "Usage"]


def test_lone_headings_of_other_strategies_are_left_alone() -> None:
    # a clause heading holds its clause's text; only the headings strategy's sections are bare headings
    tree = parse_markdown("# Tool\n\n## Install\n\n## Usage\n\nRun it.\n", "x.md")
    tree.metadata["strategy"] = "clauses"
    assert "## Install" in _targets(_prepare(tree))
