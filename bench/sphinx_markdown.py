"""Sphinx HTML pages → Markdown, with the standard library only.

Used by ``bench/fetch_corpus.py`` to turn a documentation package into a
benchmark corpus.  It is deliberately *not* hrag-pg's HTML reader: a corpus
converted by the code under test would hide the reader's mistakes.

What it produces, from the page's ``div.body`` only (navigation, sidebars
and footers are dropped):

* ``<h1>``…``<h6>`` → ``#``…``######`` headings (Sphinx nests them by section);
* paragraphs separated by blank lines, inline markup reduced to its text;
* ``<pre>`` → fenced code blocks (the ``highlight-LANG`` class gives the info
  string);
* API entries and other definition lists (``<dl>``): the term on a line of its
  own in bold (``**json.dumps(obj, *, skipkeys=False, …)**``), its
  description as ordinary blocks after it;
* admonitions ("Note", "Warning", "See also") as a paragraph prefixed with
  their title;
* lists as ``-``/``1.`` items (nested ones indented), tables as pipe tables.

``convert_docbook_page`` does the same for a page of DocBook XSL's chunked
HTML (the Debian FAQ, the installation guide): the whole ``<body>`` without
the navigation header and footer and the tables of contents, headings shifted
so the page's own title is ``#`` (a section page's ``<h2>`` title becomes
``#``, its ``<h3>`` subsections ``##``), and the admonitions ("注記",
"警告" …, drawn as a table with an icon) as a paragraph prefixed with their
title, as above.  Sphinx pages are rendered exactly as before.

The output depends only on the input bytes (no dates, no dictionaries in
hash order), so converting the same package twice gives the same files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})
_SKIP = frozenset({"script", "style", "nav", "img", "svg", "button", "form", "template"})
_BLOCK = frozenset({"p", "div", "section", "article", "aside", "main", "header", "footer", "blockquote", "figure",
                    "figcaption", "pre", "ul", "ol", "dl", "table", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
                    "li", "dd", "dt", "caption"})
# a paragraph starting like this would be read as Markdown structure: escape its first character
_NEEDS_ESCAPE = re.compile(r"^(#|>|```|~~~|[-+*] |\d{1,9}[.)] )")


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)

    @property
    def classes(self) -> list[str]:
        return self.attrs.get("class", "").split()

    def find(self, tag: str, cls: str | None = None, attr: tuple[str, str] | None = None) -> Element | None:
        """The first descendant (depth first, document order) matching tag, class and attribute."""
        for child in self.children:
            if isinstance(child, Element):
                if (child.tag == tag and (cls is None or cls in child.classes)
                        and (attr is None or child.attrs.get(attr[0]) == attr[1])):
                    return child
                found = child.find(tag, cls, attr)
                if found is not None:
                    return found
        return None


class _TreeBuilder(HTMLParser):
    """A forgiving HTML → Element tree (Sphinx output is well formed; stray end tags are ignored)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(element)
        if tag not in _VOID:
            self.stack.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def _skipped(element: Element) -> bool:
    return element.tag in _SKIP or "headerlink" in element.classes or "linenos" in element.classes


def raw_text(element: Element) -> str:
    """All text below ``element``, whitespace untouched (for code)."""
    out: list[str] = []
    for child in element.children:
        if isinstance(child, str):
            out.append(child)
        elif not _skipped(child):
            out.append("\n" if child.tag == "br" else raw_text(child))
    return "".join(out)


def _inline_raw(element: Element) -> str:
    parts: list[str] = []
    for child in element.children:
        if isinstance(child, str):
            parts.append(child)
        elif _skipped(child):
            continue
        elif child.tag == "br":
            parts.append(" ")
        elif child.tag in _BLOCK:
            parts.append(" " + _inline_raw(child) + " ")
        else:
            parts.append(_inline_raw(child))
    return "".join(parts)


def inline_text(element: Element) -> str:
    """The text of ``element`` on one line, whitespace collapsed, markup dropped."""
    return " ".join(_inline_raw(element).replace("\u00b6", "").split())


def _paragraph(text: str) -> str:
    """``text`` as a paragraph, its first character escaped where Markdown would read structure."""
    match = _NEEDS_ESCAPE.match(text)
    if not match:
        return text
    if text[0].isdigit():  # "1) A class …": escape the delimiter, a backslash before a digit is literal
        end = match.end(1) - 2
        return text[:end] + "\\" + text[end:]
    return "\\" + text


def _fence(code: str, language: str) -> str:
    code = code.strip("\n")
    code = "\n".join(line.rstrip() for line in code.splitlines())
    ticks = "```"
    while ticks in code:
        ticks += "`"
    return f"{ticks}{language}\n{code}\n{ticks}"


def _code_language(element: Element) -> str:
    for cls in element.classes:
        if cls.startswith("highlight-"):
            lang = cls[len("highlight-"):]
            if lang in ("default", "none", "text"):
                return ""
            return "python" if lang == "python3" else lang
    return ""


class _Renderer:
    def blocks(self, element: Element) -> list[str]:
        """Markdown blocks for the children of a block container."""
        out: list[str] = []
        run: list[Element | str] = []

        def flush() -> None:
            if run:
                text = inline_text(Element("span", {}, list(run)))
                if text:
                    out.append(_paragraph(text))
                run.clear()

        for child in element.children:
            if isinstance(child, str) or (child.tag not in _BLOCK and not _skipped(child)):
                run.append(child)
                continue
            flush()
            if not _skipped(child):
                out.extend(self.block(child))
        flush()
        return out

    def block(self, el: Element) -> list[str]:
        tag, classes = el.tag, el.classes
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            text = inline_text(el)
            return [f"{'#' * int(tag[1])} {text}"] if text else []
        if tag == "p":
            text = inline_text(el)
            if not text:
                return []
            return [f"**{text}**"] if "rubric" in classes else [_paragraph(text)]
        if tag == "pre":
            return [_fence(raw_text(el), "")]
        if tag == "div" and any(c.startswith("highlight-") for c in classes):
            pre = el.find("pre")
            return [_fence(raw_text(pre), _code_language(el))] if pre is not None else []
        if tag == "div" and ("admonition" in classes or "seealso" in classes):
            return self.admonition(el)
        if tag in ("ul", "ol"):
            return self.list_blocks(el)
        if tag == "dl":
            return self.definitions(el)
        if tag == "table":
            return self.table(el)
        if tag == "hr":
            return []
        return self.blocks(el)

    def admonition(self, el: Element) -> list[str]:
        title_el = next((c for c in el.children if isinstance(c, Element) and "admonition-title" in c.classes), None)
        body = Element(el.tag, el.attrs, [c for c in el.children if c is not title_el])
        inner = self.blocks(body)
        title = inline_text(title_el) if title_el is not None else ""
        return _titled(title, inner)

    def definitions(self, el: Element) -> list[str]:
        out: list[str] = []
        for child in el.children:
            if not isinstance(child, Element) or _skipped(child):
                continue
            if child.tag == "dt":
                text = inline_text(child)
                if text:
                    out.append(f"**{text}**")
            elif child.tag == "dd":
                out.extend(self.blocks(child))
            else:
                out.extend(self.block(child))
        return out

    def list_blocks(self, el: Element) -> list[str]:
        """A list: one block of ``-``/``1.`` lines when every item is one line, else one block per item
        with the item's further paragraphs, code and nested lists indented under its marker."""
        items: list[list[str]] = []
        number = int(el.attrs.get("start", "1") or 1)
        for item in (c for c in el.children if isinstance(c, Element) and c.tag == "li"):
            marker = f"{number}." if el.tag == "ol" else "-"
            number += 1
            blocks = self.blocks(item) or [""]
            pad = " " * (len(marker) + 1)
            first = f"{marker} {blocks[0]}".rstrip() if "\n" not in blocks[0] else (
                f"{marker} " + blocks[0].replace("\n", "\n" + pad))
            rest = ["\n".join(pad + line if line else line for line in b.splitlines()) for b in blocks[1:]]
            items.append([first, *rest])
        if not items:
            return []
        if all(len(parts) == 1 and "\n" not in parts[0] for parts in items):
            return ["\n".join(parts[0] for parts in items)]
        return ["\n\n".join(parts) for parts in items]

    def table(self, el: Element) -> list[str]:
        rows: list[list[str]] = []

        def collect(node: Element) -> None:
            for child in node.children:
                if isinstance(child, Element):
                    if child.tag == "tr":
                        rows.append([inline_text(c).replace("|", "\\|") for c in child.children
                                     if isinstance(c, Element) and c.tag in ("td", "th")])
                    elif child.tag != "table":
                        collect(child)

        collect(el)
        rows = [r for r in rows if any(r)]
        if not rows:
            return []
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        caption = el.find("caption")
        blocks = [inline_text(caption)] if caption is not None and inline_text(caption) else []
        return [*blocks, "\n".join(lines)]


def _titled(title: str, inner: list[str]) -> list[str]:
    """An admonition's blocks: its title before the first paragraph, or on a line of its own."""
    if not title:
        return inner
    if inner and not inner[0].startswith(("```", "-", "|", "**", "#", "\\")) and not re.match(r"\d+\. ", inner[0]):
        return [f"{title}: {inner[0]}", *inner[1:]]
    return [f"{title}:", *inner]


_DOCBOOK_DROPPED = frozenset({"navheader", "navfooter", "toc", "list-of-tables", "list-of-figures",
                              "list-of-examples"})
_DOCBOOK_ADMONITIONS = frozenset({"note", "tip", "important", "caution", "warning"})
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")


class _DocBookRenderer(_Renderer):
    """The Sphinx renderer plus DocBook XSL's navigation, admonitions and heading levels."""

    def __init__(self, shift: int) -> None:
        self.shift = shift  # levels to remove from every heading, so the page title is level 1

    def block(self, el: Element) -> list[str]:
        classes = set(el.classes)
        if el.tag == "div" and classes & _DOCBOOK_DROPPED:
            return []
        if el.tag == "div" and classes & _DOCBOOK_ADMONITIONS:
            return self.docbook_admonition(el)
        if el.tag in _HEADINGS:
            text = inline_text(el)
            return [f"{'#' * max(1, int(el.tag[1]) - self.shift)} {text}"] if text else []
        return super().block(el)

    def docbook_admonition(self, el: Element) -> list[str]:
        """``<div class="note">`` with a table (icon, ``<th>`` title, ``<td>`` body) or an ``<h3>`` title."""
        table = next((c for c in el.children if isinstance(c, Element) and c.tag == "table"), None)
        if table is not None:
            title_el = table.find("th")
            cells: list[Element] = []

            def collect(node: Element) -> None:
                for child in node.children:
                    if isinstance(child, Element):
                        if child.tag == "td":
                            cells.append(child)
                        elif child.tag != "table":
                            collect(child)

            collect(table)
            inner = [b for cell in cells for b in self.blocks(cell)]
        else:
            title_el = next((c for c in el.children if isinstance(c, Element) and c.tag in _HEADINGS), None)
            inner = self.blocks(Element(el.tag, el.attrs, [c for c in el.children if c is not title_el]))
        return _titled(inline_text(title_el) if title_el is not None else "", inner)


def _docbook_heading_levels(element: Element) -> list[int]:
    """Levels of the headings below ``element`` that the DocBook renderer keeps, in document order."""
    levels: list[int] = []
    for child in element.children:
        if not isinstance(child, Element) or _skipped(child):
            continue
        if child.tag == "div" and set(child.classes) & (_DOCBOOK_DROPPED | _DOCBOOK_ADMONITIONS):
            continue
        if child.tag in _HEADINGS:
            levels.append(int(child.tag[1]))
        else:
            levels.extend(_docbook_heading_levels(child))
    return levels


def convert_docbook_page(html: str) -> tuple[str, str]:
    """(title, Markdown) of one page of DocBook XSL chunked HTML: its ``<body>`` without navigation."""
    root = parse_html(html)
    body = root.find("body")
    if body is None:
        raise ValueError("no <body> in the page")
    levels = _docbook_heading_levels(body)
    if not levels:
        raise ValueError("no heading in the page")
    blocks = _DocBookRenderer(shift=min(levels) - 1).blocks(body)
    title = next((b.lstrip("#").strip() for b in blocks if b.startswith("# ")), "")
    return title, "\n\n".join(blocks) + "\n"


def convert_page(html: str) -> tuple[str, str]:
    """(title, Markdown) of one Sphinx page: its ``div.body`` converted."""
    root = parse_html(html)
    body = root.find("div", cls="body", attr=("role", "main")) or root.find("div", cls="body")
    if body is None:
        raise ValueError("no <div class=\"body\"> in the page")
    blocks = _Renderer().blocks(body)
    title = next((b.lstrip("#").strip() for b in blocks if b.startswith("# ")), "")
    return title, "\n\n".join(blocks) + "\n"
