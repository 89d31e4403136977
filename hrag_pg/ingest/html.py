"""HTML → tree by h1–h6 headings (the "headings" strategy for web pages).

Same shape as :mod:`hrag_pg.ingest.markdown`: headings nest into "section"
nodes, and paragraphs, list items, ``<pre>`` blocks, tables and block quotes
become leaves.  A definition list's term (``<dt>``) heads a section of its
definition (``<dd>``), one level below the heading it is under: DocBook's
variable lists and Sphinx's API entries name their subject only in the term,
and a definition cut off from it ("Many games are sgid to games…" without
"games") is a weak search target, while the term alone is a useless one.
Text in ``script``/``style``/``nav``/``head`` (menus, code that is not
content), in ``role="navigation"`` landmarks, in the navigation chrome that
documentation generators mark only by class (DocBook's header, footer and
table of contents, gtk-doc's and texinfo's "next/previous/up" bars) and in
the "¶" permalinks they put in headings is dropped: a table of contents
repeats every section title as a leaf of its own, and as a definition list
it would even open sections named like the real ones.  A page that is
nothing but navigation (a book's index page) keeps it, since it is then
the page's content.  A list item whose every word is a link (a table of
contents' entry) and texinfo's ``table.menu`` are kept as text, but as
leaves of kind "menu", which refining stores without searching them
(:mod:`hrag_pg.ingest.navigation`).  Loose text outside any block still becomes a paragraph
so nothing visible is lost.  Only the standard library's
``html.parser`` is used: it tolerates the unclosed ``<p>``/``<li>`` tags real
pages are full of.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.tree_helpers import (
    MENU_CONTAINER_KEY,
    MENU_KIND,
    add_leaf,
    close_sections,
    has_leaf_text,
    lone_title,
    open_section,
)

_IGNORED = frozenset({"script", "style", "head", "noscript", "template", "svg", "iframe"})
#: ARIA landmarks that are ``<nav>`` by another name (Sphinx's sidebar and "related" bar).
_NAVIGATION_ROLES = frozenset({"navigation", "search"})
#: Classes that mark navigation chrome: DocBook XSL's ``navheader``/``navfooter`` and
#: ``toc``/``list-of-*`` blocks (valgrind's manual customises its bars as ``table.nav``),
#: gtk-doc's ``navigation`` bar, texinfo 7's ``nav-panel``, breadcrumbs, Publican's ``docnav``
#: lists ("Prev", the book's title, "Next": the Debian handbook).
#: (Not ``sidebar``: in DocBook that is content, a boxed aside.)
_NAVIGATION_CLASSES = frozenset(
    {
        "navheader",
        "navfooter",
        "toc",
        "list-of-tables",
        "list-of-figures",
        "list-of-examples",
        "nav",
        "navigation",
        "nav-panel",
        "breadcrumb",
        "breadcrumbs",
        "docnav",
    }
)
#: Texinfo 6 puts its "Next: …, Previous: …, Up: …" bar in a ``div.header``, a class too
#: common elsewhere to skip on every page: only on pages whose generator is makeinfo.
_MAKEINFO_NAVIGATION_CLASSES = frozenset({"header"})
#: Classes of the permalink anchors documentation generators put in headings ("¶"):
#: Sphinx and Python-Markdown ``headerlink``, texinfo ``copiable-anchor`` (7: ``copiable-link``).
#: They are never content, not even of a page that is all navigation.
_PERMALINK_CLASSES = frozenset({"headerlink", "copiable-anchor", "copiable-link"})
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
#: Elements whose whole content is one leaf, and that leaf's kind.
_CONTAINERS = {"pre": "code", "table": "table", "li": "item", "blockquote": "paragraph"}
#: Elements that end the running paragraph (or a line, inside a container).
_BLOCKS = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "figure",
        "figcaption",
        "form",
        "fieldset",
        "address",
        "hr",
        "br",
        "tr",
        "body",
        "html",
        "details",
        "summary",
        "caption",
    ]
)
_SPACE_RE = re.compile(r"[ \t\r\n\f\v]+")
_WORD_CHAR_RE = re.compile(r"[^\W_]")
#: Classes of a container that is a menu whatever it holds: texinfo 6 writes its menus (links to
#: the sections below, each with a short description) as ``table.menu``.
_MENU_CLASSES = frozenset({"menu"})
#: Section level of a definition term in the outermost ``<dl>``: below every heading.
_TERM_LEVEL = 7


@dataclass
class _Container:
    tag: str
    kind: str
    nesting: int = 1  # same-tag nesting (tables in tables, quotes in quotes)
    list_depth: int = 0  # ul/ol opened inside an <li>
    row_cells: int = 0
    parts: list[str] = field(default_factory=list)
    menu: bool = False  # a container marked as a menu (texinfo's table.menu)
    links: int = 0  # open <a href> elements
    linked: bool = False  # some text inside a link
    unlinked: bool = False  # some word outside any link

    def text(self) -> str:
        raw = "".join(self.parts)
        if self.kind == "code":
            return raw.strip("\n")
        lines = (line.strip() for line in raw.split("\n"))
        return "\n".join(line for line in lines if line)


class _TreeBuilder(HTMLParser):
    def __init__(self, *, skip_navigation: bool = True) -> None:
        super().__init__(convert_charrefs=True)
        self.skip_navigation = skip_navigation
        self.navigation_classes = _NAVIGATION_CLASSES
        self.root = DraftNode(kind="document", content="")
        self.stack: list[tuple[int, DraftNode]] = [(0, self.root)]
        self.ignored = 0
        self.skipped: list[tuple[str, int]] = []  # (tag, same-tag nesting) of the skipped element
        self.in_title = False
        self.page_title: list[str] = []
        self.top_titles: list[str] = []
        self.heading: tuple[int, list[str]] | None = None
        self.container: _Container | None = None
        self.buffer: list[str] = []
        self.lists = 0  # open <dl> elements (outside containers)
        self.term: list[str] | None = None  # the <dt> being read
        self.terms: list[str] = []  # terms read, waiting for their <dd>

    # -- events ---------------------------------------------------------------
    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self.in_title = True
            return
        if tag == "meta":
            self._read_generator(attrs)
            return
        if self.skipped:
            skipped_tag, nesting = self.skipped[-1]
            if tag == skipped_tag:
                self.skipped[-1] = (tag, nesting + 1)
            return
        if tag == "body":
            self.ignored = 0  # pages that never close <head>
        if not self.ignored and self._skips(tag, attrs):
            self.skipped.append((tag, 1))
            return
        if tag in _IGNORED:
            self.ignored += 1
            return
        if self.ignored:
            return
        if self.container is not None and self._container_start(tag, attrs):
            return
        if tag in _HEADINGS:
            self._flush_paragraph()
            self.heading = (_HEADINGS[tag], [])
        elif tag == "dl":
            self._flush_paragraph()
            self.lists += 1
        elif tag == "dt" and self.lists:
            self._flush_paragraph()
            self.term = []
        elif tag == "dd" and self.lists:
            self._flush_paragraph()
            self._open_term()
        elif tag in _CONTAINERS:
            self._flush_paragraph()
            classes = set(next((value or "" for name, value in attrs if name == "class"), "").split())
            self.container = _Container(tag=tag, kind=_CONTAINERS[tag], menu=not classes.isdisjoint(_MENU_CLASSES))
        elif tag == "br" and self.heading is None:
            self.buffer.append("\n")
        elif tag in _BLOCKS:
            self._flush_paragraph()

    def _container_start(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """Handle a tag opened inside a container; False if it closes the container."""
        c = self.container
        assert c is not None
        if tag == "li" and c.tag == "li" and c.list_depth == 0:
            self._finish_container()  # an unclosed <li> followed by its sibling
            return False
        if tag == c.tag:
            c.nesting += 1
        if tag == "a" and any(name == "href" for name, _ in attrs):
            c.links += 1
        if tag in ("ul", "ol") and c.tag == "li":
            c.list_depth += 1
        if tag == "tr":
            c.row_cells = 0
            c.parts.append("\n")
        elif tag in ("td", "th"):
            if c.row_cells:
                c.parts.append(" | ")
            c.row_cells += 1
        elif tag in _BLOCKS or tag in _HEADINGS or tag in _CONTAINERS:
            c.parts.append("\n")
        return True

    def handle_endtag(self, tag: str) -> None:
        if self.skipped:
            if tag in ("body", "html"):  # a landmark never closed does not hide the rest of the page
                self.skipped = []
            elif tag == self.skipped[-1][0]:
                nesting = self.skipped.pop()[1] - 1
                if nesting:
                    self.skipped.append((tag, nesting))
            return
        if tag == "title":
            self.in_title = False
            return
        if tag in _IGNORED:
            self.ignored = max(0, self.ignored - 1)
            return
        if self.ignored:
            return
        c = self.container
        if c is not None:
            if tag == "a" and c.links:
                c.links -= 1
            if c.tag == "li" and tag in ("ul", "ol"):
                if c.list_depth == 0:
                    self._finish_container()  # list closed while its last <li> was open
                else:
                    c.list_depth -= 1
                    c.parts.append("\n")
                return
            if tag == c.tag and (c.tag != "li" or c.list_depth == 0):
                c.nesting -= 1
                if c.nesting <= 0 or c.tag == "li":
                    self._finish_container()
                    return
            if tag in _BLOCKS or tag in _HEADINGS or tag in _CONTAINERS:
                c.parts.append("\n")
            return
        if tag in _HEADINGS and self.heading is not None:
            self._finish_heading()
        elif tag == "dt" and self.term is not None:
            self._flush_paragraph()
        elif tag == "dl" and self.lists:
            self._flush_paragraph()
            self._terms_as_text()
            self._close_terms(_TERM_LEVEL + self.lists - 1)
            self.lists -= 1
        elif tag in _BLOCKS:
            self._flush_paragraph()

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.page_title.append(data)
        elif self.ignored or self.skipped:
            return
        elif self.container is not None:
            c = self.container
            c.parts.append(data if c.kind == "code" else _SPACE_RE.sub(" ", data))
            if c.links and data.strip():
                c.linked = True
            elif _WORD_CHAR_RE.search(data):
                c.unlinked = True
        elif self.heading is not None:
            self.heading[1].append(data)
        elif self.term is not None:
            self.term.append(data)
        else:
            self.buffer.append(_SPACE_RE.sub(" ", data))

    def _read_generator(self, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if values.get("name", "").lower() == "generator" and values.get("content", "").startswith("makeinfo"):
            self.navigation_classes = _NAVIGATION_CLASSES | _MAKEINFO_NAVIGATION_CLASSES

    def _skips(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """Whether an element is a permalink anchor, or navigation while that is skipped."""
        navigation = tag == "nav"
        for name, value in attrs:
            if name == "role" and value in _NAVIGATION_ROLES:
                navigation = True
            elif name == "class" and value:
                classes = set(value.split())
                if not classes.isdisjoint(_PERMALINK_CLASSES):
                    return True
                navigation = navigation or not classes.isdisjoint(self.navigation_classes)
        return navigation and self.skip_navigation

    # -- node building --------------------------------------------------------
    @property
    def current(self) -> DraftNode:
        return self.stack[-1][1]

    def _flush_paragraph(self) -> None:
        if self.heading is not None:
            self._finish_heading()
        if self.term is not None:
            text = _SPACE_RE.sub(" ", "".join(self.term)).strip()
            self.term = None
            if text:
                self.terms.append(text)
        lines = (line.strip() for line in "".join(self.buffer).split("\n"))
        self.buffer = []
        text = "\n".join(line for line in lines if line)
        if text.strip():
            self._open_term()
        add_leaf(self.current, "paragraph", text)

    def _open_term(self) -> None:
        """Open the section of the terms read so far (several ``<dt>`` may share one ``<dd>``)."""
        if self.terms:
            text = " / ".join(self.terms)
            self.terms = []
            open_section(self.stack, _TERM_LEVEL + self.lists - 1, text)

    def _terms_as_text(self) -> None:
        """Terms no definition follows (a table of contents as a ``<dl>``) are a paragraph, not headings."""
        if self.terms:
            add_leaf(self.current, "paragraph", "\n".join(self.terms))
            self.terms = []

    def _close_terms(self, level: int) -> None:
        """Leave the term sections of a ``<dl>`` that ends: what follows belongs to the heading above it."""
        close_sections(self.stack, level)

    def _finish_container(self) -> None:
        c = self.container
        assert c is not None
        self.container = None
        text = c.text()
        if text.strip():
            self._open_term()
        # a list item that is only a link (a table of contents' entry), or a menu: see navigation.py
        if c.menu:
            add_leaf(self.current, MENU_KIND, text, metadata={MENU_CONTAINER_KEY: f"{c.tag}.menu"})
        else:
            add_leaf(self.current, MENU_KIND if c.tag == "li" and c.linked and not c.unlinked else c.kind, text)

    def _finish_heading(self) -> None:
        assert self.heading is not None
        level, parts = self.heading
        self.heading = None
        text = _SPACE_RE.sub(" ", "".join(parts)).strip()
        if not text:
            return
        if level == 1:
            self.top_titles.append(text)
        self._terms_as_text()
        open_section(self.stack, level, text)

    def finish(self) -> DraftNode:
        self.close()
        if self.container is not None:
            self._finish_container()
        self._flush_paragraph()
        self._terms_as_text()
        return self.root


def parse_html(text: str, source: str, *, title: str | None = None) -> DocumentTree:
    """Build a heading tree from an HTML page.

    The document title is ``title`` if given, else the page's ``<h1>`` if it
    has exactly one, else its ``<title>`` (several ``<h1>``: see
    :func:`hrag_pg.ingest.markdown.parse_markdown`).
    """
    builder = _TreeBuilder()
    builder.feed(text)
    root = builder.finish()
    if not has_leaf_text(root):  # a page of navigation only: that is its content
        builder = _TreeBuilder(skip_navigation=False)
        builder.feed(text)
        root = builder.finish()
    page_title = _SPACE_RE.sub(" ", "".join(builder.page_title)).strip() or None
    doc_title = title if title is not None else (lone_title(builder.top_titles) or page_title)
    root.title = doc_title
    return DocumentTree(
        source=source, root=root, title=doc_title, metadata={"strategy": "headings"}
    )


__all__ = ["parse_html"]
