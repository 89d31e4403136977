"""The further benchmark corpora's tools: the Sphinx HTML converter, the page rules, the Markdown copy and the validator's section check.

They live in ``bench/`` (not part of the package), so they are imported from
there; no download happens here.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # after the installed packages: bench/ holds generic names (common, run)

import fetch_corpus
import validate_questions
from sphinx_markdown import convert_page

from hrag_pg.evaluation import Question
from hrag_pg.ingest.markdown import parse_markdown

PAGE = """<html><body>
<div class="sphinxsidebar"><h3>Navigation</h3><p>sidebar text</p></div>
<div class="body" role="main">
<section id="module-demo"><h1>demo — A demo module<a class="headerlink" href="#x">¶</a></h1>
<p>Intro with <code class="docutils literal"><span class="pre">inline</span></code> code
and <em>emphasis</em>.</p>
<div class="admonition note"><p class="admonition-title">Note</p><p>Be careful.</p></div>
<section id="api"><h2>API</h2>
<dl class="py function"><dt class="sig sig-object py" id="demo.f"><span class="sig-prename">demo.</span><span class="sig-name">f</span>(<em>x</em>, <em>y=1</em>)<a class="headerlink" href="#demo.f">¶</a></dt>
<dd><p>Return the thing.</p>
<div class="versionchanged"><p><span class="versionmodified changed">Changed in version 3.2: </span>Now faster.</p></div>
</dd></dl>
<ul><li><p>first item</p></li><li><p>second item with code:</p>
<div class="highlight-python3 notranslate"><div class="highlight"><pre><span></span>x = 1
# not a heading
</pre></div></div></li></ul>
<table class="docutils"><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1 | 2</td><td>3</td></tr></tbody></table>
<section id="deep"><h3>Deep</h3><p>1) Numbered-looking sentence.</p></section>
</section></section>
</div>
<div class="footer">footer text</div>
</body></html>"""


def test_converter_keeps_heading_levels_and_drops_navigation() -> None:
    title, markdown = convert_page(PAGE)
    assert title == "demo — A demo module"
    headings = [line for line in markdown.splitlines() if line.startswith("#") and not line.startswith("# not")]
    assert headings == ["# demo — A demo module", "## API", "### Deep"]
    assert "sidebar" not in markdown and "footer" not in markdown and "¶" not in markdown


def test_converter_renders_signatures_admonitions_code_and_tables() -> None:
    _, markdown = convert_page(PAGE)
    blocks = markdown.rstrip("\n").split("\n\n")
    assert "Intro with inline code and emphasis." in blocks
    assert "Note: Be careful." in blocks
    assert "**demo.f(x, y=1)**" in blocks
    assert "Changed in version 3.2: Now faster." in blocks
    assert "- second item with code:\n\n  ```python\n  x = 1\n  # not a heading\n  ```" in markdown
    assert "| a | b |\n|---|---|\n| 1 \\| 2 | 3 |" in markdown
    assert "1\\) Numbered-looking sentence." in blocks  # escaped so it is not read as a list item


def test_converted_page_parses_into_the_same_heading_tree_in_hrag() -> None:
    _, markdown = convert_page(PAGE)
    tree = parse_markdown(markdown, "demo.md")
    paths = [(*(a.title for a in ancestors if a.kind == "section"), node.title)
             for node, ancestors in tree.root.walk() if node.kind == "section"]
    assert paths[-3:] == [("demo — A demo module",), ("demo — A demo module", "API"),
                          ("demo — A demo module", "API", "Deep")]


def test_converter_output_is_deterministic() -> None:
    assert convert_page(PAGE) == convert_page(PAGE)


def test_page_rule_takes_top_pages_and_the_chosen_chapters_in_order() -> None:
    index = "".join(
        f'<li class="toctree-l{level}"><a class="reference internal" href="{href}">x</a>'
        for level, href in [(1, "intro.html"), (1, "a.html"), (2, "a1.html"), (2, "a2.html"),
                            (1, "b.html"), (2, "b1.html"), (2, "b1.html#anchor"), (1, "c.html"), (2, "c1.html")])
    spec = fetch_corpus.CorpusSpec(name="t", package="p", pinned_version="1", licence="l", html_root="r",
                                   index_page="index.html", top_pages=("intro.html",), first_chapter="a.html",
                                   last_chapter="b.html", description="d")
    assert fetch_corpus.select_pages(index, spec) == [
        ("", "intro.html"), ("a.html", "a1.html"), ("a.html", "a2.html"), ("b.html", "b1.html")]


MD_INDEX = """<!--introduced_in=v0.10.0-->

* [About this documentation](documentation.md)

<hr class="line"/>

* [Alpha module](alpha.md)
* [Beta: `node:beta` API](beta.md#beta-api)
* [Alpha again](alpha.md)
* [Not Markdown](assets/style.css)
* [Elsewhere](../other/gamma.md)

<hr class="line"/>

* [Code repository and issue tracker](https://example.invalid/node)
"""

MD_SPEC = fetch_corpus.MarkdownCorpusSpec(
    name="t", package="fake-doc", pinned_version="1.0-1", licence="l", doc_root="usr/share/doc/fake",
    index_page="api/index.md", skip_pages=("documentation.md",), description="d")


def test_markdown_page_rule_takes_the_index_links_in_order_without_the_skipped_pages() -> None:
    assert fetch_corpus.select_markdown_pages(MD_INDEX, MD_SPEC) == [
        ("Alpha module", "alpha.md"), ("Beta: `node:beta` API", "beta.md")]
    with pytest.raises(SystemExit, match=r"documentation\.md"):  # a skipped page must be in the index
        fetch_corpus.select_markdown_pages(MD_INDEX.replace("(documentation.md)", "(docs.md)"), MD_SPEC)


def test_markdown_page_is_read_decompressed_or_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "alpha.md.gz").write_bytes(gzip.compress(b"# Alpha\n\ntext\n", mtime=0))
    (tmp_path / "beta.md").write_bytes(b"# Beta\n")
    assert fetch_corpus.read_markdown_page(tmp_path, "alpha.md") == ("alpha.md.gz", b"# Alpha\n\ntext\n")
    assert fetch_corpus.read_markdown_page(tmp_path, "beta.md") == ("beta.md", b"# Beta\n")
    with pytest.raises(FileNotFoundError):
        fetch_corpus.read_markdown_page(tmp_path, "gamma.md")
    assert fetch_corpus.page_title("<!-- x -->\n\n# Beta: `node:beta` API\n\n## Sub\n") == "Beta: `node:beta` API"


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")
def test_markdown_corpus_is_built_from_a_package_byte_identically(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    api = pkg / "usr/share/doc/fake/api"
    api.mkdir(parents=True)
    (pkg / "DEBIAN").mkdir()
    (pkg / "DEBIAN/control").write_text("Package: fake-doc\nVersion: 1.0-1\nArchitecture: all\n"
                                        "Maintainer: nobody <nobody@example.invalid>\nDescription: test\n")
    (api / "index.md").write_text(MD_INDEX)
    alpha = "# Alpha\n\n<!-- YAML\nadded: v1.0.0\n-->\n\nText with `code` and [a link][].\n\n[a link]: beta.md\n"
    (api / "alpha.md.gz").write_bytes(gzip.compress(alpha.encode(), mtime=0))
    (api / "beta.md").write_text("# Beta\n\nSmall page, left uncompressed.\n")
    (api / "documentation.md.gz").write_bytes(gzip.compress(b"# About\n", mtime=0))
    deb = tmp_path / "fake-doc_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(deb)], check=True,
                   capture_output=True)
    out, again = tmp_path / "out", tmp_path / "again"
    manifest = fetch_corpus.build(MD_SPEC, deb, out)
    fetch_corpus.build(MD_SPEC, deb, again)
    names = sorted(p.name for p in out.iterdir())
    assert names == ["001-alpha.md", "002-beta.md", "manifest.json"]
    assert all((out / name).read_bytes() == (again / name).read_bytes() for name in names)
    assert (out / "001-alpha.md").read_text() == alpha  # copied as it is, no conversion
    assert json.loads((out / "manifest.json").read_text()) == manifest
    assert manifest["version"] == "1.0-1" and manifest["files"] == 2
    assert [(p["file"], p["title"], p["source_page"]) for p in manifest["pages"]] == [
        ("001-alpha.md", "Alpha", "api/alpha.md.gz"), ("002-beta.md", "Beta", "api/beta.md")]
    assert manifest["chars"] == len(alpha) + len("# Beta\n\nSmall page, left uncompressed.\n")


CORPUS_TEXT = """# Title

Intro paragraph about nothing in particular at all.

## Alpha

First alpha paragraph says the sky is blue today.

```
x = 1

# a comment in code, not a heading

y = 2
```

Second alpha paragraph says the grass is green today.

### Alpha one

Third alpha paragraph says the sea is deep today.

## Beta

Only beta paragraph says the desert is dry today.
"""


def _broad(*snippets: str) -> Question:
    return Question(id="b", kind="broad", question="q?", evidence=tuple(snippets))


def test_broad_evidence_in_one_section_passes_and_names_it(tmp_path: Path) -> None:
    (tmp_path / "doc.md").write_text(CORPUS_TEXT, encoding="utf-8")
    corpus = validate_questions.Corpus.load(tmp_path)
    q = _broad("First alpha paragraph says the sky is blue today",
               "Second alpha paragraph says the grass is green today",
               "Third alpha paragraph says the sea is deep today")
    assert validate_questions.broad_sections(q, corpus) == [("doc.md", ("Title", "Alpha"))]
    assert validate_questions.check([q], corpus) == []


def test_broad_evidence_across_top_level_sections_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "doc.md").write_text(CORPUS_TEXT, encoding="utf-8")
    corpus = validate_questions.Corpus.load(tmp_path)
    q = _broad("First alpha paragraph says the sky is blue today",
               "Second alpha paragraph says the grass is green today",
               "Only beta paragraph says the desert is dry today")
    problems = validate_questions.check([q], corpus)
    assert len(problems) == 1 and "not one section" in problems[0]


def test_validator_accepts_questions_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "doc.md").write_text(CORPUS_TEXT, encoding="utf-8")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "n1", "kind": "narrow", "question": "Colour of the sky?", '
                         '"evidence": ["First alpha paragraph says the sky is blue today."]}\n', encoding="utf-8")
    assert validate_questions.main(["--corpus", str(tmp_path), "--questions", str(questions)]) == 0
    assert "ok: 1 questions" in capsys.readouterr().out


RULES = """# Rules

## Chapter 1 General

### Article 1 Purpose
1. These rules govern the spending of company money on meals.
2. They apply to every employee of the company.

### Article 2 Meals
1. A meal with a client may cost at most 50 dollars a head.
"""


def _named(snippet: str, section: str) -> str:
    return json.dumps({"id": "n1", "kind": "narrow", "question": "?", "source": "rules.md", "section": section,
                       "evidence": [snippet]})


def test_a_snippet_outside_the_section_its_question_names_is_a_problem(tmp_path: Path) -> None:
    (tmp_path / "rules.md").write_text(RULES, encoding="utf-8")
    inside = json.loads(_named("A meal with a client may cost at most 50 dollars a head.", "Article 2 Meals"))
    outside = json.loads(_named("They apply to every employee of the company.", "Article 2 Meals"))
    missing = json.loads(_named("They apply to every employee of the company.", "Article 9 Cars"))
    assert validate_questions.section_problems([inside], tmp_path) == []
    assert "not under 'Article 2 Meals'" in validate_questions.section_problems([outside], tmp_path)[0]
    assert "0 headings 'Article 9 Cars'" in validate_questions.section_problems([missing], tmp_path)[0]


@pytest.mark.parametrize(("corpus", "questions"), [("regulations-ja", "regulations-ja.jsonl"),
                                                   ("regulations-ja", "regulations-ja-crosslingual.jsonl"),
                                                   ("regulations-en", "regulations-en.jsonl")])
def test_the_regulation_question_sets_hold_up_against_their_corpus(corpus: str, questions: str) -> None:
    """Each snippet verbatim in its file, inside the article the question names (items are short: 20 characters)."""
    assert validate_questions.main(["--corpus", str(BENCH / "corpora" / corpus),
                                    "--questions", str(BENCH / "questions" / questions), "--min-chars", "20"]) == 0


def test_the_edit_picks_a_one_line_paragraph_and_falls_back_to_a_wrapped_one() -> None:
    import common

    one_line = "Some words here and there make up this single line of prose that is long enough to pick."
    wrapped = ("The contents of the newly created buffer are unknown and may contain\n"
               "sensitive data, so it must be overwritten before it is handed out.")
    code = "```\nNot prose at all, even though this line is long enough and ends with a dot.\n```"
    edited, original = common.edit_one_paragraph(f"# T\n\n{wrapped}\n\n{one_line}\n\n{code}\n")
    assert original == one_line, "a one-line paragraph first (the pgdocs edit stays the same)"
    edited, original = common.edit_one_paragraph(f"# T\n\n{wrapped}\n\n{code}\n")
    assert original == wrapped and edited.count(common.EDIT_MARKER) == 1
    with pytest.raises(ValueError, match="no short prose paragraph"):
        common.edit_one_paragraph(f"# T\n\n{code}\n\n  indented\n  lines that are not a paragraph at all here.\n")
