from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from hrag_pg.errors import IngestError
from hrag_pg.ingest import loaders
from hrag_pg.ingest.loaders import iter_supported_files, load_document

from .ingest_checks import FIXTURES, assert_leaves_nonempty


@pytest.mark.parametrize(
    ("name", "strategy", "root_child_kinds"),
    [
        ("guide.md", "headings", {"section"}),
        ("work_rules_ja.md", "clauses", {"paragraph", "chapter"}),
        ("security_policy_ja.md", "clauses", {"chapter"}),
        ("page.html", "headings", {"section"}),
        ("sample.pdf", "pages", {"page"}),
        ("module.py", "code", {"paragraph", "code", "class", "function"}),
    ],
)
def test_strategy_is_chosen_by_extension_and_content(
    name: str, strategy: str, root_child_kinds: set[str]
) -> None:
    tree = load_document(FIXTURES / name)
    assert tree.metadata["strategy"] == strategy
    assert {c.kind for c in tree.root.children} == root_child_kinds
    assert tree.source == str(FIXTURES / name)
    assert_leaves_nonempty(tree)


def test_explicit_strategy_and_source_override_defaults() -> None:
    tree = load_document(FIXTURES / "guide.md", strategy="window", source="docs/guide")
    assert tree.source == "docs/guide"
    assert {c.kind for c in tree.root.children} == {"window"}
    assert (
        load_document(FIXTURES / "sample.pdf", strategy="window").metadata["strategy"] == "window"
    )


def test_txt_with_articles_is_read_as_clauses(tmp_path: Path) -> None:
    path = tmp_path / "terms.txt"
    path.write_text("Article 1 Scope\nThese terms apply.\n", encoding="utf-8")
    assert load_document(path).metadata["strategy"] == "clauses"


def test_crlf_and_bom_are_normalised(tmp_path: Path) -> None:
    path = tmp_path / "w.md"
    path.write_bytes("\ufeff# T\r\n\r\nbody\r\n".encode())
    tree = load_document(path)
    assert tree.root.full_text() == "# T\n\nbody"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"abc\xff\xfedef", r"not valid UTF-8 \(byte 0xff at byte offset 3\)"),
        (
            b"hello\x00world " + b"plain text " * 20,
            r"NUL byte at offset 5; PostgreSQL text cannot store NUL bytes",
        ),
        (bytes(range(256)) * 4, r"looks like a binary file"),
        (b"", r"is empty"),
        (b"  \n\t\n", r"is empty"),
        (b"\xef\xbb\xbf \r\n\r\n", r"is empty"),
    ],
)
def test_bad_input_raises_ingest_error_naming_the_file(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message) as info:
        load_document(path)
    assert str(path) in str(info.value)


def test_invalid_utf8_can_be_replaced(tmp_path: Path) -> None:
    path = tmp_path / "latin1.md"
    path.write_bytes("café au lait".encode("latin-1"))
    assert "caf\ufffd" in load_document(path, errors="replace").root.full_text()


def test_missing_file_directory_and_unknown_type_are_refused(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="does not exist"):
        load_document(tmp_path / "nope.md")
    with pytest.raises(IngestError, match="is a directory"):
        load_document(tmp_path)
    (tmp_path / "data.xlsx").write_bytes(b"PK")
    with pytest.raises(IngestError, match=r"unsupported file type '\.xlsx'"):
        load_document(tmp_path / "data.xlsx")
    with pytest.raises(IngestError, match="unknown strategy"):
        load_document(FIXTURES / "guide.md", strategy="magic")
    with pytest.raises(IngestError, match="Python"):
        load_document(FIXTURES / "guide.md", strategy="code")


def test_iter_supported_files_walks_sorted_and_skips_hidden_and_unsupported(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    shutil.copy(FIXTURES / "guide.md", tmp_path / "sub" / "b.md")
    shutil.copy(FIXTURES / "page.html", tmp_path / "a.html")
    (tmp_path / ".git" / "config.md").write_text("x")
    (tmp_path / ".hidden.md").write_text("x")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    supported, skipped = iter_supported_files(
        [tmp_path, tmp_path / "a.html", tmp_path / "missing.md"]
    )
    assert supported == [tmp_path / "a.html", tmp_path / "sub" / "b.md"]
    assert skipped == [
        (tmp_path / "image.png", "unsupported file type '.png'"),
        (tmp_path / "missing.md", "does not exist"),
    ]


def test_the_window_size_reaches_the_window_strategy(tmp_path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("\n\n".join(" ".join(f"w{i}x{j}" for j in range(40)) for i in range(30)), encoding="utf-8")
    small = load_document(path, strategy="window", window_tokens=120)
    large = load_document(path, strategy="window", window_tokens=1200)
    assert len(small.root.children) > len(large.root.children) >= 1


def test_a_page_without_visible_text_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "blank.html"
    path.write_text("<html><head><script>var x = 1;</script></head><body>  </body></html>")
    with pytest.raises(IngestError, match="found no text blocks") as info:
        load_document(path)
    assert str(path) in str(info.value)


def test_an_rst_file_is_read_by_its_section_titles() -> None:
    tree = load_document(FIXTURES / "guide.rst")
    assert (tree.metadata["strategy"], tree.metadata["file_type"], tree.title) == ("headings", "rst", "hrag-pg manual")
    assert "Install" in {node.key for node, _ in tree.root.walk() if node.kind == "section"}


def test_a_gzipped_file_is_read_decompressed_as_the_type_of_its_inner_name(tmp_path: Path) -> None:
    path = tmp_path / "guide.rst.gz"
    path.write_bytes(gzip.compress((FIXTURES / "guide.rst").read_bytes()))
    tree = load_document(path)
    assert tree.metadata["file_type"] == "rst"
    assert tree.root.full_text() == load_document(FIXTURES / "guide.rst").root.full_text()
    assert tree.source == str(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"# not compressed at all\n", r"not a valid gzip file"),
        (gzip.compress(b"# Title\n\n" + b"text " * 10_000)[:40], r"not a valid gzip file"),
        (gzip.compress(b"abc \xff bad"), r"not valid UTF-8"),
    ],
    ids=["not compressed", "truncated", "not UTF-8 inside"],
)
def test_a_bad_gzip_file_is_refused_naming_the_file(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "README.md.gz"
    path.write_bytes(content)
    with pytest.raises(IngestError, match=message) as info:
        load_document(path)
    assert str(path) in str(info.value)


def test_a_gzip_file_over_the_limit_once_decompressed_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(loaders, "MAX_FILE_BYTES", 1_000)
    path = tmp_path / "big.md.gz"
    path.write_bytes(gzip.compress(b"word " * 1_000))  # 5,000 bytes decompressed, far less compressed
    with pytest.raises(IngestError, match=r"decompressed, the file is over the limit of 1,000 bytes"):
        load_document(path)


@pytest.mark.parametrize("name", ["README", "copyright", "NEWS.Debian.gz", "README.source", "changelog.gz",
                                  "v2.38.1-ReleaseNotes.gz", "RELEASE-NOTES", "2.0_release_notes",
                                  "README_MISSING_SYSCALL_OR_IOCTL.gz", "README-hacking", "NEWS-old.Debian"])
def test_documentation_files_named_like_readme_are_read_as_text(tmp_path: Path, name: str) -> None:
    text = "Upstream notes\n\nThe package builds with the default flags.\n"
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode()) if name.endswith(".gz") else text.encode())
    tree = load_document(path)
    assert tree.metadata["file_type"] == "markdown"
    assert "default flags" in tree.root.full_text()


def test_other_files_without_a_known_extension_and_compressed_pdfs_stay_unsupported(tmp_path: Path) -> None:
    for name in ("Makefile", "build.sh", "manual.pdf.gz", "notes.gz", "install-sh"):
        (tmp_path / name).write_bytes(b"x")
    supported, skipped = iter_supported_files([tmp_path])
    assert supported == []
    assert skipped == [
        (tmp_path / "Makefile", "unsupported file type '(no extension)'"),
        (tmp_path / "build.sh", "unsupported file type '.sh'"),
        (tmp_path / "install-sh", "unsupported file type '(no extension)'"),
        (tmp_path / "manual.pdf.gz", "unsupported file type '.pdf.gz'"),
        (tmp_path / "notes.gz", "unsupported file type '.gz' (the name inside has no known extension)"),
    ]
    with pytest.raises(IngestError, match=r"manual\.pdf\.gz: unsupported file type '\.pdf\.gz' \(supported: .*\.rst"):
        load_document(tmp_path / "manual.pdf.gz")
    with pytest.raises(IngestError, match="a compressed PDF is not read; decompress it first"):
        load_document(tmp_path / "manual.pdf.gz", strategy="pages")


def test_a_directory_walk_finds_rst_gzipped_and_readme_like_files(tmp_path: Path) -> None:
    (tmp_path / "README.Debian").write_text("Debian notes\n")
    (tmp_path / "changelog.Debian.amd64.gz").write_bytes(gzip.compress(b"pkg (1.0+b1) unstable; binNMU\n"))
    (tmp_path / "index.rst").write_text("Title\n=====\n\nbody\n")
    (tmp_path / "usage.md.gz").write_bytes(gzip.compress(b"# Usage\n\nrun it\n"))
    (tmp_path / "empty.md.gz").write_bytes(gzip.compress(b"  \n"))
    supported, skipped = iter_supported_files([tmp_path])
    assert supported == [tmp_path / "README.Debian", tmp_path / "changelog.Debian.amd64.gz", tmp_path / "index.rst",
                         tmp_path / "usage.md.gz"]
    assert skipped == [(tmp_path / "empty.md.gz", "empty file")]


@pytest.mark.parametrize(("name", "shown"), [
    ("install.sh", ".sh"), ("changelog.tar.gz", ".tar.gz"), ("install.cpython-311.pyc", ".pyc"),
    ("Install.pm", ".pm"), ("license.png", ".png"), ("FAQ.pod", ".pod"), ("readme.debian.sh", ".sh"),
    ("news.a.b.c", ".c"), ("v2.1-install.sh", ".sh"), ("2.33-notes", ".33-notes"),
])
def test_a_doc_name_with_a_code_or_archive_extension_is_not_read_as_text(tmp_path: Path, name: str,
                                                                         shown: str) -> None:
    (tmp_path / name).write_bytes(b"\x00\x01binary or code")
    assert iter_supported_files([tmp_path]) == ([], [(tmp_path / name, f"unsupported file type '{shown}'")])
