"""Fetch a further benchmark corpus from a distribution package, as Markdown.

    python bench/fetch_corpus.py pystdlib          # → bench/.data/corpora/pystdlib/*.md + manifest.json
    python bench/fetch_corpus.py nodejs            # → bench/.data/corpora/nodejs/*.md + manifest.json
    python bench/fetch_corpus.py debja             # → bench/.data/corpora/debja/*.md + manifest.json
    python bench/fetch_corpus.py NAME --out DIR [--deb FILE …]

The benchmark's questions must not be tuned to one corpus, so these are of
other kinds than the PostgreSQL manual and written by nobody on the team.
Each is chosen by a rule, not as pages that retrieve well:

``pystdlib``
    The Python 3.11 Library Reference from the Debian package
    ``python3.11-doc`` (PSF License): the five pages on built-ins (functions,
    constants, types, exceptions, introduction) plus every module page of the
    chapters "Text Processing Services" through "Concurrent Execution", in
    the order of the reference's own table of contents
    (``library/index.html``).  Each HTML page is converted by
    ``bench/sphinx_markdown.py`` (standard library only; not hrag-pg's HTML
    reader).

``nodejs``
    The Node.js 18 API documentation from the Debian package ``nodejs-doc``
    (MIT licence, as Node.js: the package's copyright file puts it under
    ``Files: *``, "Expat", © Node.js contributors, Joyent, Inc. and other
    Node contributors).  Every page that the package's own table of contents
    ``api/index.md`` links to, in its order, except the two non-API pages
    before its first rule, ``documentation.md`` ("About this documentation")
    and ``synopsis.md`` ("Usage and example"); links outside the directory
    (the code repository) are not pages.  ``all.html``, every page in one,
    is not linked from the index (and has no Markdown), so it is not taken
    either; nor is ``policy.md``, which the index does not link.  The pages
    are Markdown already: each ``api/NAME.md.gz`` is decompressed as it is
    (a page too small to have been compressed, ``string_decoder.md``, is
    copied), nothing converted.

``debja``
    Japanese prose, from three Debian 12 packages, each page by its own
    package's table of contents, in its order:

    * ``developers-reference-ja`` (the Debian Developer's Reference in
      Japanese, Sphinx HTML; GPL-2 or later): every level-1 entry
      (``toctree-l1``) of ``index.html``, i.e. its eight chapters and its
      appendix, each a single page (``developers-reference.html``, all of them in one, is
      not linked and not taken);
    * ``debian-faq-ja`` (the Debian FAQ in Japanese, DocBook XSL HTML;
      © Software in the Public Interest, verbatim and modified copies and
      translations permitted with the notice kept): every chapter
      (``span.chapter``) of ``ja/index.ja.html``'s table of contents;
    * ``installation-guide-amd64`` (the Installation Guide, DocBook XSL HTML,
      all languages in one package; GPL-2), only its ``ja/`` directory: the
      preface and every level-1 section (``span.preface``, ``span.sect1``) of
      ``index.html``'s table of contents.  Chapter and appendix pages hold
      their title, a table of contents and at most one sentence, so they are
      not pages of the corpus; appendix F, the GNU GPL in English, has no
      sections and so is not taken either.

    Translations of these three are in part untranslated English paragraphs
    (the Developer's Reference most, about a third); they are kept as the
    packages have them.  Sphinx pages go through ``convert_page``, DocBook
    ones through ``convert_docbook_page`` (``bench/sphinx_markdown.py``),
    whose headings are shifted so that each file's title is ``#``.  Files are
    ``NNN-PART-STEM.md`` (``001-devref-scope.md``, ``010-faq-basic-defs.md``,
    ``026-install-pr01.md`` …), numbered over the whole corpus; the
    packages ``debian-reference-ja`` and ``maint-guide-ja`` are held out for
    other uses and are not read.

The package is fetched with ``apt-get download`` (the pinned version if the
archive still has it, else the current one; the manifest records which) and
unpacked with ``dpkg-deb -x``.  The output depends only on the package:
running this twice gives byte-identical files and manifest.  ``--deb FILE``
uses a package file you already have; for a corpus of several packages give
it once per package you have (each is matched by its ``Package`` field), the
others are downloaded.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from sphinx_markdown import convert_docbook_page, convert_page  # noqa: E402 - importable once HERE is on sys.path

DATA_DIR = HERE / ".data"
CONVERTER_VERSION = 1


@dataclass(frozen=True)
class CorpusSpec:
    """A documentation package and the rule that picks its pages."""

    name: str
    package: str
    pinned_version: str
    licence: str
    html_root: str  # inside the package
    index_page: str  # relative to html_root: the table of contents the rule reads
    top_pages: tuple[str, ...]  # level-1 entries of the index taken as pages themselves
    first_chapter: str  # level-1 entries from this one …
    last_chapter: str  # … to this one contribute their level-2 pages
    description: str


@dataclass(frozen=True)
class MarkdownCorpusSpec:
    """A documentation package whose pages are Markdown already (gzipped), and the rule that picks them."""

    name: str
    package: str
    pinned_version: str
    licence: str
    doc_root: str  # inside the package
    index_page: str  # relative to doc_root: the table of contents the rule reads
    skip_pages: tuple[str, ...]  # pages the index links that are not taken (relative to the index's directory)
    description: str


@dataclass(frozen=True)
class PackagePart:
    """One package of a corpus built from several, and the rule that picks its pages."""

    package: str
    pinned_version: str
    licence: str
    prefix: str  # in the output file names, NNN-PREFIX-STEM.md
    html_format: str  # "sphinx" or "docbook": which converter, and how the table of contents is read
    html_root: str  # inside the package
    index_page: str  # relative to html_root: the table of contents the rule reads
    toc_entries: tuple[str, ...]  # the entries taken: "toctree-l1" (Sphinx), or DocBook TOC classes
    page_suffix: str  # cut from a page's name to make its STEM


@dataclass(frozen=True)
class BundleCorpusSpec:
    """A corpus made of the pages of several packages, each part by its own rule, in this order."""

    name: str
    parts: tuple[PackagePart, ...]
    description: str


CORPORA: dict[str, CorpusSpec | MarkdownCorpusSpec | BundleCorpusSpec] = {
    "pystdlib": CorpusSpec(
        name="pystdlib",
        package="python3.11-doc",
        pinned_version="3.11.2-6+deb12u8",
        licence="PSF License Agreement (Python documentation); code examples also Zero-Clause BSD",
        html_root="usr/share/doc/python3.11/html",
        index_page="library/index.html",
        top_pages=("intro.html", "functions.html", "constants.html", "stdtypes.html", "exceptions.html"),
        first_chapter="text.html",
        last_chapter="concurrency.html",
        description=("The Python 3.11 Library Reference: the built-ins pages and every module page of the "
                     "chapters 'Text Processing Services' to 'Concurrent Execution', in table-of-contents order"),
    ),
    "nodejs": MarkdownCorpusSpec(
        name="nodejs",
        package="nodejs-doc",
        pinned_version="18.20.4+dfsg-1~deb12u2",
        licence="MIT (Expat), as Node.js: Node.js contributors, Joyent, Inc. and other Node contributors",
        doc_root="usr/share/doc/nodejs",
        index_page="api/index.md",
        skip_pages=("documentation.md", "synopsis.md"),
        description=("The Node.js 18 API documentation: every page linked from api/index.md, in its order, "
                     "except the non-API pages documentation.md and synopsis.md; Markdown as the package has it"),
    ),
    "debja": BundleCorpusSpec(
        name="debja",
        parts=(
            PackagePart(
                package="developers-reference-ja", pinned_version="12.18",
                licence="GPL-2 or later (Christian Schwarz, Adam Di Carlo, Raphaël Hertzog and others)",
                prefix="devref", html_format="sphinx", html_root="usr/share/developers-reference/ja",
                index_page="index.html", toc_entries=("toctree-l1",), page_suffix=".html",
            ),
            PackagePart(
                package="debian-faq-ja", pinned_version="11.1",
                licence=("© 1996-2003 Software in the Public Interest: verbatim and modified copies and "
                         "translations may be distributed with the permission notice kept"),
                prefix="faq", html_format="docbook", html_root="usr/share/doc/debian/FAQ/ja",
                index_page="index.ja.html", toc_entries=("chapter",), page_suffix=".ja.html",
            ),
            PackagePart(
                package="installation-guide-amd64", pinned_version="20230508+deb12u1",
                licence="GPL-2 (Bruce Perens, Sven Rudolph, the Debian Installer team and others)",
                prefix="install", html_format="docbook", html_root="usr/share/doc/installation-guide-amd64/ja",
                index_page="index.html", toc_entries=("preface", "sect1"), page_suffix=".html",
            ),
        ),
        description=("Japanese documentation from Debian 12: the Developer's Reference (its chapters), the "
                     "Debian FAQ (its chapters) and the amd64 Installation Guide (its preface and level-1 "
                     "sections), each in its table of contents' order; Sphinx / DocBook HTML converted"),
    ),
}

_TOC_ENTRY = re.compile(r'<li class="toctree-l(\d)"><a class="reference internal" href="([^"#]+)(?:#[^"]*)?">')


def select_pages(index_html: str, spec: CorpusSpec) -> list[tuple[str, str]]:
    """(chapter page, page) pairs chosen by the spec's rule, in table-of-contents order."""
    chapters: list[str] = []
    pages: dict[str, list[str]] = {}
    for match in _TOC_ENTRY.finditer(index_html):
        level, href = int(match.group(1)), match.group(2)
        if level == 1:
            if href not in pages:
                chapters.append(href)
                pages[href] = []
            current = href
        elif level == 2 and chapters and href != current and href not in pages[current]:
            pages[current].append(href)
    for needed in (*spec.top_pages, spec.first_chapter, spec.last_chapter):
        if needed not in pages:
            raise SystemExit(f"{spec.index_page}: table of contents has no entry {needed!r}")
    chosen = [("", page) for page in spec.top_pages]
    start, end = chapters.index(spec.first_chapter), chapters.index(spec.last_chapter)
    for chapter in chapters[start:end + 1]:
        chosen.extend((chapter, page) for page in pages[chapter])
    return chosen


_MD_LINK = re.compile(r"^[ \t]*[*+-][ \t]+\[(?P<text>[^\]]+)\]\((?P<href>[^)\s]+)\)", re.MULTILINE)


def select_markdown_pages(index_md: str, spec: MarkdownCorpusSpec) -> list[tuple[str, str]]:
    """(index entry text, page) for every list-item link of ``index_md`` to a local ``.md`` page, in order.

    Links with a scheme or to another directory are not pages of the
    corpus; the spec's ``skip_pages`` are left out (each must be linked,
    so a changed index is noticed); a page linked twice counts once.
    """
    chosen: list[tuple[str, str]] = []
    seen: set[str] = set()
    for match in _MD_LINK.finditer(index_md):
        text, href = match.group("text"), match.group("href").split("#", 1)[0]
        if ":" in href or "/" in href or not href.endswith(".md") or href in seen:
            continue
        seen.add(href)
        if href not in spec.skip_pages:
            chosen.append((text, href))
    for needed in spec.skip_pages:
        if needed not in seen:
            raise SystemExit(f"{spec.index_page}: table of contents has no entry {needed!r}")
    if not chosen:
        raise SystemExit(f"{spec.index_page}: table of contents links no pages")
    return chosen


_SPHINX_TOC_ENTRY = re.compile(r'<li class="(?P<cls>toctree-l\d)"><a class="reference internal" href="(?P<href>[^"#]+)')
_DOCBOOK_TOC_ENTRY = re.compile(r'<span class="(?P<cls>[\w-]+)">\s*<a href="(?P<href>[^"#]+)')


def select_toc_pages(index_html: str, part: PackagePart) -> list[str]:
    """The pages of the index's table-of-contents entries of the part's kinds, in order, each once."""
    pattern = _SPHINX_TOC_ENTRY if part.html_format == "sphinx" else _DOCBOOK_TOC_ENTRY
    chosen: list[str] = []
    for match in pattern.finditer(index_html):
        href = match.group("href")
        if match.group("cls") in part.toc_entries and ":" not in href and "/" not in href and href not in chosen:
            chosen.append(href)
    if not chosen:
        raise SystemExit(f"{part.package}: {part.index_page} has no table-of-contents entry of {part.toc_entries}")
    return chosen


def read_markdown_page(directory: Path, page: str) -> tuple[str, bytes]:
    """(file name read, bytes) of ``page``: its ``.gz`` decompressed, or the page itself if not compressed."""
    compressed = directory / f"{page}.gz"
    if compressed.is_file():
        return compressed.name, gzip.decompress(compressed.read_bytes())
    plain = directory / page
    if plain.is_file():
        return plain.name, plain.read_bytes()
    raise FileNotFoundError(f"neither {page}.gz nor {page}")


def page_title(markdown: str) -> str:
    """The text of the page's first level-1 ATX heading ('' if none)."""
    match = re.search(r"^# +(.+?)[ \t]*$", markdown, re.MULTILINE)
    return match.group(1) if match else ""


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def download_deb(spec: CorpusSpec | MarkdownCorpusSpec | PackagePart, cache: Path) -> Path:
    """The package file, from the cache or ``apt-get download`` (pinned version first)."""
    cache.mkdir(parents=True, exist_ok=True)
    pinned = sorted(cache.glob(f"{spec.package}_{spec.pinned_version.replace(':', '%3a')}_*.deb"))
    if pinned:
        return pinned[0]
    if shutil.which("apt-get") is None:
        raise SystemExit("apt-get not found: run this on Debian/Ubuntu, or give --deb FILE")
    attempts = [f"{spec.package}={spec.pinned_version}", spec.package]
    updated = False
    for target in attempts:
        before = set(cache.glob("*.deb"))
        result = _run(["apt-get", "download", target], cache)
        if result.returncode != 0 and not updated and os.geteuid() == 0:
            # a fresh machine has no package lists yet; one update, then retry
            _run(["apt-get", "update"], cache)
            updated = True
            result = _run(["apt-get", "download", target], cache)
        new = sorted(set(cache.glob("*.deb")) - before)
        if result.returncode == 0 and new:
            if target == spec.package:
                print(f"warning: {spec.package} {spec.pinned_version} is no longer in the archive; "
                      f"converted {new[0].name} instead (check the questions with validate_questions.py)",
                      file=sys.stderr)
            return new[0]
    raise SystemExit(f"apt-get download {spec.package} failed: {result.stderr.strip().splitlines()[-1:]}")


def _deb_version(deb: Path) -> str:
    result = subprocess.run(["dpkg-deb", "--field", str(deb), "Version"], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _convert_sphinx(spec: CorpusSpec, tree: Path, deb: Path) -> list[tuple[dict[str, object], str]]:
    """The selected HTML pages of the unpacked package ``tree``, converted: (manifest entry, markdown)."""
    root = tree / spec.html_root
    index = root / spec.index_page
    if not index.is_file():
        raise SystemExit(f"{deb.name}: no {spec.html_root}/{spec.index_page} in the package")
    base = index.parent
    chosen = select_pages(index.read_text(encoding="utf-8"), spec)
    converted: list[tuple[dict[str, object], str]] = []
    chapter_titles: dict[str, str] = {}
    for chapter, page in chosen:
        if chapter and chapter not in chapter_titles:
            chapter_titles[chapter], _ = convert_page((base / chapter).read_text(encoding="utf-8"))
        try:
            title, markdown = convert_page((base / page).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{deb.name}: {spec.html_root}/library/{page}: {exc}") from exc
        stem = page.removesuffix(".html")
        converted.append(({"file": f"{len(converted) + 1:03d}-{stem}.md", "chapter": chapter_titles.get(chapter, ""),
                           "title": title, "source_page": f"library/{page}"}, markdown))
    return converted


def _copy_markdown(spec: MarkdownCorpusSpec, tree: Path, deb: Path) -> list[tuple[dict[str, object], str]]:
    """The selected Markdown pages of the unpacked package ``tree``, decompressed as they are."""
    root = tree / spec.doc_root
    index = root / spec.index_page
    if not index.is_file():
        raise SystemExit(f"{deb.name}: no {spec.doc_root}/{spec.index_page} in the package")
    base = index.parent
    copied: list[tuple[dict[str, object], str]] = []
    for entry, page in select_markdown_pages(index.read_text(encoding="utf-8"), spec):
        try:
            source, data = read_markdown_page(base, page)
            markdown = data.decode("utf-8")
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{deb.name}: {spec.doc_root}/{base.relative_to(root) / page}: {exc}") from exc
        copied.append(({"file": f"{len(copied) + 1:03d}-{page.removesuffix('.md')}.md", "index_entry": entry,
                        "title": page_title(markdown), "source_page": (base / source).relative_to(root).as_posix()},
                       markdown))
    return copied


def _convert_part(part: PackagePart, tree: Path, deb: Path, first: int) -> list[tuple[dict[str, object], str]]:
    """The part's selected HTML pages in the unpacked package ``tree``, converted; files numbered from ``first``."""
    root = tree / part.html_root
    index = root / part.index_page
    if not index.is_file():
        raise SystemExit(f"{deb.name}: no {part.html_root}/{part.index_page} in the package")
    convert = convert_page if part.html_format == "sphinx" else convert_docbook_page
    converted: list[tuple[dict[str, object], str]] = []
    for page in select_toc_pages(index.read_text(encoding="utf-8"), part):
        try:
            title, markdown = convert((index.parent / page).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{deb.name}: {part.html_root}/{page}: {exc}") from exc
        stem = page.removesuffix(part.page_suffix)
        converted.append(({"file": f"{first + len(converted):03d}-{part.prefix}-{stem}.md", "package": part.package,
                           "title": title, "source_page": f"{part.html_root}/{page}"}, markdown))
    return converted


def _write_pages(out: Path, pages: list[tuple[dict[str, object], str]]) -> tuple[list[dict[str, object]], int]:
    """Replace the Markdown files and manifest in ``out`` by ``pages``: (manifest entries, characters)."""
    if out.exists():
        for old in out.iterdir():
            if old.is_file() and (old.suffix == ".md" or old.name == "manifest.json"):
                old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    files: list[dict[str, object]] = []
    total = 0
    for entry, markdown in pages:
        data = markdown.encode("utf-8")
        (out / str(entry["file"])).write_bytes(data)
        total += len(markdown)
        files.append({**entry, "chars": len(markdown), "sha256": _sha256(data)})
    return files, total


def build(spec: CorpusSpec | MarkdownCorpusSpec, deb: Path, out: Path) -> dict[str, object]:
    """Unpack ``deb``, write the selected pages into ``out`` as Markdown; returns the manifest."""
    with tempfile.TemporaryDirectory(prefix="fetch-corpus-") as tmp:
        subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
        if isinstance(spec, MarkdownCorpusSpec):
            pages, converter = _copy_markdown(spec, Path(tmp), deb), "none: the package's Markdown, decompressed"
        else:
            pages, converter = _convert_sphinx(spec, Path(tmp), deb), f"bench/sphinx_markdown.py v{CONVERTER_VERSION}"
    files, total = _write_pages(out, pages)
    manifest: dict[str, object] = {
        "corpus": spec.name, "description": spec.description, "licence": spec.licence,
        "package": spec.package, "version": _deb_version(deb), "deb_sha256": _sha256(deb.read_bytes()),
        "converter": converter,
        "files": len(files), "chars": total, "pages": files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def build_bundle(spec: BundleCorpusSpec, debs: dict[str, Path], out: Path) -> dict[str, object]:
    """Unpack each part's package (``debs``: package name → file), write every part's pages into ``out``."""
    pages: list[tuple[dict[str, object], str]] = []
    packages: list[dict[str, object]] = []
    for part in spec.parts:
        deb = debs[part.package]
        with tempfile.TemporaryDirectory(prefix="fetch-corpus-") as tmp:
            subprocess.run(["dpkg-deb", "-x", str(deb), tmp], check=True)
            converted = _convert_part(part, Path(tmp), deb, len(pages) + 1)
        pages.extend(converted)
        packages.append({"package": part.package, "version": _deb_version(deb), "deb_sha256": _sha256(deb.read_bytes()),
                         "licence": part.licence, "index_page": f"{part.html_root}/{part.index_page}",
                         "toc_entries": list(part.toc_entries), "files": len(converted)})
    files, total = _write_pages(out, pages)
    manifest: dict[str, object] = {
        "corpus": spec.name, "description": spec.description, "packages": packages,
        "converter": f"bench/sphinx_markdown.py v{CONVERTER_VERSION}",
        "files": len(files), "chars": total, "pages": files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return manifest


def _deb_package(deb: Path) -> str:
    result = subprocess.run(["dpkg-deb", "--field", str(deb), "Package"], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"--deb {deb}: not a package file ({result.stderr.strip()})")
    return result.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(CORPORA), help="which corpus")
    parser.add_argument("--out", type=Path, help="output directory (default bench/.data/corpora/NAME)")
    parser.add_argument("--deb", type=Path, action="append", default=[], metavar="FILE",
                        help="use this package file instead of downloading (once per package of the corpus)")
    args = parser.parse_args(argv)
    spec = CORPORA[args.name]
    out = args.out or DATA_DIR / "corpora" / spec.name
    if isinstance(spec, BundleCorpusSpec):
        given = {_deb_package(deb): deb for deb in args.deb}
        unknown = sorted(set(given) - {part.package for part in spec.parts})
        if unknown:
            parser.error(f"--deb: {', '.join(unknown)} is not a package of {spec.name}")
        debs = {part.package: given.get(part.package) or download_deb(part, DATA_DIR / "downloads")
                for part in spec.parts}
        manifest = build_bundle(spec, debs, out)
        packages = manifest["packages"]
        assert isinstance(packages, list)
        print(f"{spec.name}: {manifest['files']} files, {manifest['chars']:,} characters from "
              + ", ".join(f"{p['package']} {p['version']} ({p['files']} files)" for p in packages) + f" → {out}")
        return 0
    if len(args.deb) > 1:
        parser.error(f"--deb: {spec.name} is built from one package")
    deb = args.deb[0] if args.deb else download_deb(spec, DATA_DIR / "downloads")
    manifest = build(spec, deb, out)
    print(f"{spec.name}: {manifest['files']} files, {manifest['chars']:,} characters from "
          f"{spec.package} {manifest['version']} → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
