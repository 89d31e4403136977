"""Generated documents for the round-trip property tests, and the expectations they are held to.

Every generator yields a :class:`Case`: the document as a reader gets it, the
text ``node_text(root)`` must return, and the reader that parses it.  The
expectation is computed here, independently of the code under test:

* for text formats it is the document after the normalisation docs/guarantees.md
  documents, and nothing else (:func:`normalised`);
* for HTML it is the text of the generated blocks, one blank line apart
  (what the reader is documented to extract).

The same module re-implements, for the comparison, the rule by which
``hrag.node_text`` joins rows (:func:`text_of_rows`) and the rule by which
node ids are derived (:func:`expected_ids`).
"""

from __future__ import annotations

import ast
import html
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from hrag_pg.ingest.clauses import parse_clauses
from hrag_pg.ingest.code import parse_python
from hrag_pg.ingest.html import parse_html
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pages import parse_pages_text
from hrag_pg.ingest.pipeline import IngestOptions
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tree import DocumentTree, DraftNode
from hrag_pg.ingest.window import parse_window

#: The namespace of every hrag id (a constant: changing it would change every stored id).
ID_NAMESPACE = uuid.UUID("6f1c8e2a-3b7d-5c1e-9a4f-2d8b0e6a7c35")


def normalised(text: str) -> str:
    """The normalisation of docs/guarantees.md: BOM dropped, CRLF/CR → LF, the document's outer whitespace dropped."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n").strip()


def text_of_rows(rows: Sequence[tuple[str, str]]) -> str:
    """``hrag.node_text``'s rule over (content, separator) rows in seq order.

    The first row with content gives its content; every later row with
    content gives separator + content; rows without content give nothing.
    """
    out: list[str] = []
    for content, separator in rows:
        if content:
            if out:
                out.append(separator)
            out.append(content)
    return "".join(out)


def expected_ids(root: DraftNode, collection: str, source: str) -> list[uuid.UUID]:
    """Ids in pre-order: uuid5(namespace, collection ␟ source ␟ structural path).

    The path is "/"-joined segments: a node's key, or its kind and position
    among its siblings; a segment repeated among siblings gets "~1", "~2"….
    """
    ids: list[uuid.UUID] = []

    def visit(node: DraftNode, path: str) -> None:
        ids.append(uuid.uuid5(ID_NAMESPACE, f"{collection}\x1f{source}\x1f{path}"))
        seen: Counter[str] = Counter()
        for i, child in enumerate(node.children):
            segment = child.key or f"{child.kind}{i}"
            repeat = seen[segment]
            seen[segment] += 1
            visit(child, f"{path}/{segment}~{repeat}" if repeat else f"{path}/{segment}")

    visit(root, "")
    return ids


@dataclass(frozen=True)
class Case:
    kind: str
    text: str
    expected: str
    parse: Callable[[str, str], DocumentTree]

    def __repr__(self) -> str:  # hypothesis prints failing examples with this
        return f"Case({self.kind!r}, text={self.text!r})"


# ------------------------------------------------------------------- words

ENGLISH = ["employees", "submit", "form", "within", "days", "office", "manager", "approves", "leave",
           "travel", "budget", "report", "policy", "the", "a", "of", "to", "and", "laptop", "badge",
           "quarterly", "review", "backup", "server", "password", "rotates", "every", "Monday", "3.5",
           "e.g.", "(see", "appendix)", "it's", "\"quoted\"", "cost:", "20,000", "yen", "café", "naïve",
           "[/etc/hosts]", "a&b", "x<y"]
JAPANESE = ["従業員は", "通勤手当を", "申請する", "会社は", "毎月25日に", "給与を", "支払う", "試用期間中の",
            "昼食手当は", "本採用以降とする", "ウイルス対策ソフトを", "導入しなければならない", "私物端末の",
            "業務利用は", "許可制とする"]

words = st.lists(st.sampled_from(ENGLISH), min_size=1, max_size=25).map(" ".join)
english_sentence = words.map(lambda s: s[0].upper() + s[1:] + ".")
japanese_sentence = st.lists(st.sampled_from(JAPANESE), min_size=1, max_size=8).map(lambda ws: "".join(ws) + "。")
sentence = st.one_of(english_sentence, japanese_sentence)
#: One line far over any child budget: many sentences, or no sentence end at all (cut between words).
long_line = st.one_of(
    st.lists(sentence, min_size=20, max_size=40).map(" ".join),
    st.lists(st.sampled_from(ENGLISH), min_size=150, max_size=300).map(" ".join),
    st.lists(st.sampled_from(JAPANESE), min_size=60, max_size=120).map("".join),
)
line_end = st.sampled_from(["", "", "", " ", "  ", "\t"])  # trailing whitespace on a line is text too
#: A blank line inside code: empty, or indented (spaces, a tab) as editors leave them.
code_blank = st.sampled_from(["", "    ", "        ", "\t", "  \t"])


@st.composite
def paragraph(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.lists(sentence, min_size=1, max_size=3).map(" ".join), min_size=1, max_size=3))
    return "\n".join(line + draw(line_end) for line in lines)


#: Between blocks: one blank line, several, blank lines with spaces, or none.
gap = st.sampled_from(["\n\n", "\n\n", "\n\n\n", "\n\n\n\n", "\n \n", "\n\t\n\n", "\n"])
outer = st.sampled_from(["", "", "\n", "\n\n", "  \n", " ", "\n\n \n"])


@st.composite
def joined(draw: st.DrawFn, blocks: list[str]) -> str:
    text = blocks[0]
    for block in blocks[1:]:
        text += draw(gap) + block
    return draw(outer) + text + draw(outer)


@st.composite
def raw_form(draw: st.DrawFn, text: str) -> str:
    """The text as a file may hold it: CRLF or CR line ends, a BOM."""
    ending = draw(st.sampled_from(["\n", "\n", "\r\n", "\r"]))
    return ("\ufeff" if draw(st.booleans()) else "") + text.replace("\n", ending)


# ---------------------------------------------------------------- markdown

heading = st.tuples(st.integers(1, 6), st.lists(st.sampled_from(ENGLISH + JAPANESE), min_size=1, max_size=4),
                    st.sampled_from(["", "", " ", "  "]), st.sampled_from(["", "", " ##", " #"])
                    ).map(lambda t: f"{t[2]}{'#' * t[0]} {' '.join(t[1])}{t[3]}")
list_block = st.lists(st.tuples(st.sampled_from(["-", "*", "1.", "2)", "  -", "    *"]), words),
                      min_size=1, max_size=4).map(lambda items: "\n".join(f"{m} {w}" for m, w in items))
code_block = st.tuples(
    st.sampled_from(["```", "~~~"]),
    st.lists(st.sampled_from(["# a comment, not a heading", "## neither is this", "x = 1", "",
                              "def helper(x):", "    return x  # trailing", "class Thing:",
                              "@decorator", "print('# hash in a string')", "    ",
                              "x = 1  ", "    return x\t", "\ty = 2 \t", "\t", "  \t"]),
             min_size=1, max_size=8),
).map(lambda t: f"{t[0]}python\n" + "\n".join(t[1]) + f"\n{t[0]}")
#: Indented code (read as a paragraph, which loses no text): trailing whitespace and indented blank lines.
indented_code = st.lists(st.sampled_from(["$ make test  ", "ok\t", "", "    ", "  nested  ", "SELECT 1;"]),
                         min_size=1, max_size=5).map(
    lambda lines: "    $ hrag check\t\n" + "\n".join(f"    {line}" if line else "" for line in lines))
table = st.lists(words, min_size=1, max_size=3).map(
    lambda rows: "| a | b |\n|---|---|\n" + "\n".join(f"| {r} | x |" for r in rows))
quote = st.lists(words, min_size=1, max_size=3).map(lambda ls: "\n".join(f"> {line}" for line in ls))
#: HTML comments: one block up to the line holding -->, whatever their lines look like (headings, items);
#: an unclosed one runs to the end of the text.
html_comment = st.tuples(st.lists(st.one_of(words, heading, st.just("  - v1.2.3"), st.just("")), max_size=4),
                         st.sampled_from([" -->", "-->", "--> trailing", ""])
                         ).map(lambda t: "<!-- YAML\n" + "\n".join(t[0]) + ("\n" + t[1] if t[1] else ""))
#: Link reference definitions (markup: the next node's separator, or a markup leaf at either end),
#: a destination or title on a line of its own included; "[^1]: ..." is a footnote, content.
link_definitions = st.lists(st.tuples(st.sampled_from(ENGLISH), st.sampled_from(
    ["https://example.org", "#anchor", '<a b> "Title"', "\n  <#on-the-next-line>\n  'title'"])),
    min_size=1, max_size=3).map(lambda defs: "\n".join(f"[{label}]: {target}" for label, target in defs))
#: A table of contents: items of links only (menus, stored as markup unless nothing else is searched).
link_list = st.lists(st.tuples(st.sampled_from(["-", "*", "1.", "  -"]), st.sampled_from(ENGLISH),
                               st.sampled_from(["(#anchor)", "(other.md)", "[ref]"])),
                     min_size=1, max_size=4).map(lambda items: "\n".join(f"{m} [{w}]{t}" for m, w, t in items))
markdown_block = st.one_of(heading, heading, paragraph(), paragraph(), list_block, link_list, code_block,
                           indented_code, table, quote,
                           long_line, st.just("#"), st.just("---"), html_comment, st.just("<!--type=module-->"),
                           link_definitions, st.just("[^1]: a footnote"), st.just("(a-target)="),
                           st.just("```{toctree}\n:hidden:\nindex\n```"), st.just("```{note}\nA note. Two.\n```"),
                           st.just("```{toctree}\nunclosed"))


@st.composite
def markdown_cases(draw: st.DrawFn) -> Case:
    text = draw(raw_form(draw(joined(draw(st.lists(markdown_block, min_size=1, max_size=12))))))
    return Case("headings", text, normalised(text), parse_markdown)


# ---------------------------------------------------------------- reStructuredText

@st.composite
def rst_title(draw: st.DrawFn) -> str:
    text = " ".join(draw(st.lists(st.sampled_from(ENGLISH + JAPANESE), min_size=1, max_size=4)))
    char = draw(st.sampled_from(["=", "-", "~", "^", "*", "#"]))
    rule = char * (len(text) + draw(st.integers(0, 3)))
    return f"{rule}\n{text}\n{rule}" if draw(st.booleans()) else f"{text}\n{rule}"


rst_literal = st.tuples(paragraph(), st.lists(st.sampled_from(["x = 1", "SELECT 1;", "", "  nested", "x = 1  ",
                                                               "\t", "  nested\t"]),
                                              min_size=1, max_size=4)
                        ).map(lambda t: t[0] + "::\n\n" + "\n".join(f"    {line}" if line else "" for line in t[1]))
rst_directive = st.tuples(st.sampled_from(["code-block:: sql", "note::", "toctree::", "image:: a.png", "warning::"]),
                          words).map(lambda t: f".. {t[0]}\n\n   {t[1]}")
rst_markup = st.sampled_from([".. a comment\n   that goes on", ".. _target: https://example.org", "----------",
                              "..", "::", ".. |name| replace:: text"])
rst_table = st.lists(words, min_size=1, max_size=3).map(
    lambda rows: "=====  =====\na      b\n=====  =====\n" + "\n".join(f"{r}  x" for r in rows) + "\n=====  =====")
rst_references = st.lists(st.tuples(st.sampled_from(["-", "*", "1."]), st.sampled_from(ENGLISH),
                                     st.sampled_from([":doc:`{}`", "`{} <https://example.org>`_", ":ref:`{}`"])),
                           min_size=1, max_size=3).map(
    lambda items: "\n".join(f"{m} {r.format(w)}" for m, w, r in items))
rst_block = st.one_of(rst_title(), rst_title(), paragraph(), paragraph(), list_block, rst_references, rst_literal,
                      rst_directive, rst_markup, rst_table, long_line)


@st.composite
def rst_cases(draw: st.DrawFn) -> Case:
    # blocks one blank line apart at least: a title must follow a blank line to be a title,
    # but any text must round-trip whatever it is read as
    text = draw(raw_form(draw(joined(draw(st.lists(rst_block, min_size=1, max_size=12))))))
    return Case("rst", text, normalised(text), parse_rst)


# ----------------------------------------------------------------- clauses

def _article(number: int, title: str, body: str | None, items: list[str], style: str, indent: str) -> str:
    markers = {"arabic": lambda i: f"{i}.", "full": lambda i: f"{chr(0xFF10 + i)}．",
               "paren": lambda i: f"({i})", "circled": lambda i: chr(0x2460 + i - 1)}[style]
    lines = [f"第{number}条（{title}）"]
    if body:
        lines.append(body)
    for i, item in enumerate(items, start=1):
        first, _, rest = item.partition(" ")
        lines.append(f"{indent}{markers(i)} {first}")
        if rest:
            lines.append(f"{indent}{indent}{rest}")  # a continuation line, indented
    return "\n".join(lines)


article = st.tuples(st.sampled_from(["目的", "手当", "休暇", "服務", "罰則"]),
                    st.one_of(st.none(), japanese_sentence),
                    st.lists(st.one_of(japanese_sentence, english_sentence, long_line), min_size=0, max_size=5),
                    st.sampled_from(["arabic", "full", "paren", "circled"]),
                    st.sampled_from(["", "", " ", "\u3000"]))


@st.composite
def clause_cases(draw: st.DrawFn) -> Case:
    parts = [draw(st.sampled_from(["# 就業規則", "就業規則"]))] if draw(st.booleans()) else []
    articles = draw(st.lists(article, min_size=1, max_size=6))
    chapter_every = draw(st.sampled_from([0, 2, 3]))
    for n, (title, body, items, style, indent) in enumerate(articles, start=1):
        if chapter_every and (n - 1) % chapter_every == 0:
            parts.append(f"{draw(st.sampled_from(['## ', '']))}第{(n - 1) // chapter_every + 1}章 総則")
        if body is None and not items:
            items = ["この条の定めに従う。"]
        parts.append(_article(n, title, body, items, style, indent))
    if draw(st.booleans()):
        parts.append("## 附則\n" + draw(paragraph()))
    text = draw(raw_form(draw(joined(parts))))
    return Case("clauses", text, normalised(text), parse_clauses)


# -------------------------------------------------------------------- code

names = st.sampled_from(["alpha", "beta", "gamma", "load", "save", "parse", "render", "close"])
decorator = st.sampled_from(["@staticmethod", "@functools.cache", "@property", "@app.command('x')"])
comment = st.sampled_from(["# why this exists", "# TODO: remove", "#: documented attribute", "#"])
docstring_line = st.one_of(words, st.sampled_from([">>> def as_complex(dct):", "...     return dct",
                                                   ">>> json.dumps([1, 2])", "'[1, 2]'", "\\\\", ""]),
                           long_line)


@st.composite
def docstring(draw: st.DrawFn, indent: str) -> str:
    lines = draw(st.lists(docstring_line, min_size=1, max_size=6))
    body = "\n".join(f"{indent}{line}".rstrip() + draw(line_end) if line else draw(st.sampled_from(["", indent]))
                     for line in lines[1:])
    # (a one-line docstring ending in a quote would end in four: a syntax error, not a case)
    first = lines[0] + (" " if not body and lines[0].endswith('"') else "")
    return f'{indent}r"""{first}' + (f"\n{body}\n{indent}" if body else "") + '"""'


@st.composite
def function(draw: st.DrawFn, indent: str = "") -> str:
    lines = [f"{indent}{c}{draw(line_end)}" for c in draw(st.lists(comment, max_size=2))]
    lines += [f"{indent}{d}{draw(line_end)}" for d in draw(st.lists(decorator, max_size=2))]
    prefix = draw(st.sampled_from(["def", "def", "async def"]))
    lines.append(f"{indent}{prefix} {draw(names)}(self, x={draw(st.sampled_from(['1', 'None', repr('a#b')]))}):"
                 + draw(line_end))
    if draw(st.booleans()):
        lines.append(draw(docstring(indent + "    ")))
    body = draw(st.lists(st.sampled_from(["y = x + 1", "# inner comment", "", "", "return x",
                                          "if x:\n{i}        return None", f"s = {'x' * 3!r}"]),
                         min_size=1, max_size=4))
    # trailing spaces and tabs after statements, and blank lines that keep the indentation, are text too
    lines += [f"{indent}    {b}".replace("{i}", indent) + draw(line_end) if b else draw(code_blank) for b in body]
    lines.append(f"{indent}    return x" + draw(line_end))
    return "\n".join(lines)


attribute = st.one_of(st.sampled_from(["x = 1", "name: str = 'a'", "items: list[int] = []", "x = 1  ", "y = 2\t"]),
                      long_line.map(lambda s: f"text = {s!r}"))


@st.composite
def klass(draw: st.DrawFn, indent: str = "", depth: int = 0) -> str:
    lines = [f"{indent}{d}" for d in draw(st.lists(st.sampled_from(["@dataclass", "@final"]), max_size=1))]
    lines.append(f"{indent}class {draw(names).title()}{draw(st.sampled_from(['', '(Base)', '(Base, metaclass=M)']))}:"
                 + draw(line_end))
    members: list[str] = []
    if draw(st.booleans()):
        members.append(draw(docstring(indent + "    ")))
    kinds = ["attr", "method", "method", "attr", "comment"] + (["class"] if depth == 0 else [])
    chosen = draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=6))
    if not members and set(chosen) == {"comment"}:
        chosen.append("attr")  # a body of comments only is not Python
    if draw(st.booleans()):
        chosen += ["method", draw(st.sampled_from(["attr", "comment"]))]  # lines after a method
    for kind in chosen:
        if kind == "attr":
            members.append(f"{indent}    {draw(attribute)}")
        elif kind == "method":
            members.append(draw(function(indent + "    ")))
        elif kind == "comment":
            members.append(f"{indent}    {draw(comment)}")
        else:
            members.append(draw(klass(indent + "    ", depth + 1)))
    text = "\n".join(lines)
    for member in members:
        # blank lines between members: empty or indented
        text += draw(st.sampled_from(["\n", "\n", "\n\n", "\n\n\n", f"\n{indent}    \n", "\n\t\n"])) + member
    return text


module_part = st.one_of(st.sampled_from(["import os", "from json import dumps", "CONSTANT = 3", "# section",
                                         "import os  ", "CONSTANT = 3\t", "import os\n  \nimport sys"]),
                        long_line.map(lambda s: f"TEXT = {s!r}"), function(), klass(), klass())


@st.composite
def code_cases(draw: st.DrawFn) -> Case:
    parts = []
    if draw(st.booleans()):
        parts.append(draw(docstring("")))
    parts += draw(st.lists(module_part, min_size=0, max_size=5))
    parts.insert(draw(st.integers(len(parts) and 1, len(parts))) if parts else 0, draw(klass()))  # always a class
    text = draw(st.sampled_from(["", "#!/usr/bin/env python3\n"])) + parts[0]
    for part in parts[1:]:
        text += draw(st.sampled_from(["\n", "\n\n", "\n\n\n", "\n\n\n\n"])) + part
    text += draw(st.sampled_from(["", "\n", "\n\n"]))
    ast.parse(text)  # the generator makes valid Python only
    text = draw(raw_form(text))
    return Case("code", text, normalised(text), parse_python)


# ---------------------------------------------------------- window, pages

@st.composite
def window_cases(draw: st.DrawFn) -> Case:
    blocks = draw(st.lists(st.one_of(paragraph(), paragraph(), long_line), min_size=1, max_size=10))
    text = draw(raw_form(draw(joined(blocks))))
    size = draw(st.sampled_from([20, 60, 200, 1200]))

    def parse(text: str, source: str) -> DocumentTree:
        return parse_window(text, source, parent_tokens=size)

    return Case(f"window{size}", text, normalised(text), parse)


@st.composite
def pages_cases(draw: st.DrawFn) -> Case:
    pages = [draw(joined(blocks)) if blocks else draw(outer)
             for blocks in draw(st.lists(st.lists(st.one_of(paragraph(), long_line), max_size=4),
                                         min_size=1, max_size=5))]
    text = pages[0]
    for page in pages[1:]:
        text += draw(st.sampled_from(["\f", "\n\f", "\n\f\n", "\n\n\f"])) + page
    if not text.strip():
        text += "\f" + draw(paragraph())
    text = draw(raw_form(text))
    return Case("pages", text, normalised(text), parse_pages_text)


# -------------------------------------------------------------------- html

@st.composite
def html_cases(draw: st.DrawFn) -> Case:
    """HTML whose extracted text is known: each block's text, one blank line apart."""
    markup: list[str] = []
    texts: list[str] = []
    for kind in draw(st.lists(st.sampled_from(["h", "p", "p", "ul", "dl", "pre", "long"]), min_size=1, max_size=10)):
        if kind == "h":
            level, text = draw(st.integers(1, 6)), draw(words)
            markup.append(f"<h{level}>{html.escape(text)}</h{level}>")
            texts.append(text)
        elif kind in ("p", "long"):
            text = draw(long_line if kind == "long" else st.lists(sentence, min_size=1, max_size=3).map(" ".join))
            markup.append(f"<p>{html.escape(text)}</p>")
            texts.append(text)
        elif kind == "ul":
            items = draw(st.lists(words, min_size=1, max_size=4))
            markup.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            texts += items
        elif kind == "dl":  # each term heads a section of its definition's paragraphs
            entries = draw(st.lists(st.tuples(words, st.lists(sentence, min_size=1, max_size=2)),
                                    min_size=1, max_size=3))
            markup.append("<dl>" + "".join(
                f"<dt>{html.escape(term)}</dt><dd>" + "".join(f"<p>{html.escape(s)}</p>" for s in sentences)
                + "</dd>" for term, sentences in entries) + "</dl>")
            for term, sentences in entries:
                texts += [term, *sentences]
        else:
            code = draw(st.lists(st.sampled_from(["x = 1", "    return x", "# comment", "def f(x):", ""]),
                                 min_size=1, max_size=5).map("\n".join)).strip("\n")
            if not code.strip():
                code = "pass"
            markup.append(f"<pre>{html.escape(code)}</pre>")
            texts.append(code)
    page = "<html><head><title>T</title><script>var x = 1;</script></head><body>\n" + \
        "\n".join(markup) + "\n</body></html>"
    return Case("html", page, "\n\n".join(texts), parse_html)


any_case = st.one_of(markdown_cases(), clause_cases(), code_cases(), window_cases(), pages_cases(),
                     html_cases())

# The overlap is drawn below the piece size: IngestOptions refuses an overlap as long as a piece.
options = st.sampled_from([8, 30, 150]).flatmap(lambda max_child: st.builds(
    IngestOptions,
    child=st.sampled_from(["paragraph", "sentence", "fact", "function", "none"]),
    max_child_tokens=st.just(max_child),
    pack_tokens=st.sampled_from([0, 0, 8]),
    join_lead_ins=st.booleans(),
    overlap_tokens=st.sampled_from([o for o in (0, 5, 25) if o < max_child]),
    max_parent_tokens=st.sampled_from([40, 300, 3000]),
    group_children_over=st.sampled_from([0, 3, 6]),
    group_tokens=st.sampled_from([30, 512]),
    sentences_per_child=st.integers(1, 3),
))
