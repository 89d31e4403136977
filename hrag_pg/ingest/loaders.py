"""Files → trees: pick the strategy, read the bytes, refuse bad input clearly.

Everything a user can get wrong about a file (missing, a directory, not
UTF-8, binary, NUL bytes PostgreSQL cannot store, empty, no text blocks)
raises :class:`IngestError` with one sentence naming the file and the fix,
before anything reaches the database.
"""

from __future__ import annotations

import functools
import gzip
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from hrag_pg.errors import IngestError
from hrag_pg.ingest.clauses import looks_like_clauses, parse_clauses
from hrag_pg.ingest.code import parse_python
from hrag_pg.ingest.html import parse_html
from hrag_pg.ingest.markdown import parse_markdown
from hrag_pg.ingest.pages import extract_pdf_pages, parse_pages_text, parse_pdf
from hrag_pg.ingest.rst import parse_rst
from hrag_pg.ingest.tree import DocumentTree
from hrag_pg.ingest.tree_helpers import has_leaf_text
from hrag_pg.ingest.window import parse_window

STRATEGIES = ("headings", "clauses", "pages", "code", "window")
#: Extension → file type; the type decides how text is read and the default strategy.
SUPPORTED_EXTENSIONS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "markdown",
    ".rst": "rst",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".py": "python",
}
#: Files without a known extension that are documentation by name (README, README.Debian,
#: NEWS.gz, copyright): read as text, like a ``.txt`` file.  Other unknown names stay
#: unsupported, so a directory walk does not read scripts or build files as prose.
DOC_FILE_NAMES = frozenset({
    "authors", "bugs", "changelog", "changes", "contributing", "contributors", "copying", "copyright",
    "faq", "history", "install", "licence", "license", "news", "notice", "readme", "release-notes",
    "release_notes", "releasenotes", "thanks", "todo",
})
#: A version before a doc name, as in util-linux's ``releases/v2.38.1-ReleaseNotes.gz``.
_VERSION_PREFIX = re.compile(r"v?\d+(?:\.\d+)*[-_]")
#: A topic after a doc name, as in valgrind's ``README_MISSING_SYSCALL_OR_IOCTL`` or
#: ``README-hacking``.  Not after "install": autotools' ``install-sh`` is a script.
_TOPIC_SUFFIX = re.compile(r"[-_][a-z0-9]+(?:[-_][a-z0-9]+)*")
_NO_TOPIC_NAMES = frozenset({"install"})
#: A doc name may carry up to two qualifiers (README.Debian, LICENSE.APACHE, changelog.Debian.amd64,
#: as Debian names them), but none of these: then it is code, data or a build product
#: (install.sh, changelog.tar.gz; install.cpython-311.pyc is refused for its "-" anyway).
_NOT_DOC_QUALIFIERS = frozenset({
    "a", "ac", "am", "bat", "bin", "bz2", "c", "cc", "cfg", "cmake", "conf", "cpp", "css", "csv", "dat",
    "db", "dll", "exe", "gif", "go", "h", "hpp", "in", "ini", "java", "jpeg", "jpg", "js", "json", "log",
    "lua", "mk", "o", "pl", "pm", "png", "pod", "ps1", "py", "pyc", "pyo", "rb", "rs", "sh", "so", "sql",
    "svg", "tar", "tgz", "toml", "ts", "tsv", "vim", "xml", "xz", "yaml", "yml", "zip", "zst",
})
#: A ``.gz`` file is read decompressed, as the file type of the name without ``.gz`` (the way
#: Debian installs most of its documentation); not PDFs, which are read from disk by pypdf.
COMPRESSED_SUFFIX = ".gz"
#: Largest file accepted (bytes; decompressed, for a .gz file): parsing is in memory, and a
#: bigger file is better split first.
MAX_FILE_BYTES = 20_000_000
#: Longest line accepted in text, Markdown and Python files (characters): a single line is one
#: paragraph, and splitting one that long takes minutes (a minified or generated file, not prose).
MAX_LINE_CHARS = 100_000
_CONTROL_BYTES = bytes(b for b in range(32) if b not in b"\t\n\r\f\v\x1b")


def _check_binary(path: Path, data: bytes) -> None:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError(f"{path}: the file is UTF-16 encoded; convert it to UTF-8 first")
    sample = data[:8192]
    controls = sum(sample.count(bytes([b])) for b in _CONTROL_BYTES)
    if sample.count(0) > len(sample) // 100 or controls > len(sample) // 10:
        raise IngestError(
            f"{path}: looks like a binary file{', once decompressed,' if _compressed(path) else ''} not text; "
            "pass a text, Markdown, reStructuredText, HTML, PDF or Python file"
        )
    offset = data.find(b"\x00")
    if offset >= 0:
        raise IngestError(
            f"{path}: contains a NUL byte at offset {offset}{' (decompressed)' if _compressed(path) else ''}; "
            "PostgreSQL text cannot store NUL bytes, "
            "remove them first"
        )


def _compressed(path: Path) -> bool:
    return path.name.lower().endswith(COMPRESSED_SUFFIX)


def file_type_of(path: Path) -> str | None:
    """The file type ``path`` is read as by default (see SUPPORTED_EXTENSIONS), or None if unsupported."""
    name = path.name.lower().removesuffix(COMPRESSED_SUFFIX)
    file_type = SUPPORTED_EXTENSIONS.get(Path(name).suffix)
    if file_type is None and _is_doc_name(name):
        file_type = "markdown"
    if file_type == "pdf" and _compressed(path):
        return None
    return file_type


def _is_plain_text(path: Path, file_type: str) -> bool:
    """A text file that is not Markdown by name (.txt, README, NEWS): its lone title lines may be headings."""
    return file_type == "markdown" and Path(path.name.lower().removesuffix(COMPRESSED_SUFFIX)).suffix not in (
        ".md", ".markdown")


def _is_doc_name(name: str) -> bool:
    """README, copyright, README.Debian, v2.38-ReleaseNotes, README_DEVELOPERS (lower-cased, no .gz); not install.sh."""
    version = _VERSION_PREFIX.match(name)
    if version:
        name = name[version.end():]
    stem, *qualifiers = name.split(".")
    if stem not in DOC_FILE_NAMES:
        stem = next((d for d in DOC_FILE_NAMES - _NO_TOPIC_NAMES
                     if stem.startswith(d) and _TOPIC_SUFFIX.fullmatch(stem, len(d))), stem)
    return stem in DOC_FILE_NAMES and len(qualifiers) <= 2 and all(
        q.isalnum() and q not in _NOT_DOC_QUALIFIERS for q in qualifiers)


def unsupported_type(path: Path) -> str:
    """The skip reason of a file a directory walk does not read: ``unsupported file type '.sh'``."""
    suffix = Path(path.name.lower().removesuffix(COMPRESSED_SUFFIX)).suffix
    if _compressed(path) and not suffix:  # COMPAT.gz: the name does not say what it holds
        return "unsupported file type '.gz' (the name inside has no known extension)"
    shown = suffix + COMPRESSED_SUFFIX if _compressed(path) else suffix
    return f"unsupported file type {shown or '(no extension)'!r}"


def supported_summary() -> str:
    """What a directory walk reads, for error messages."""
    known = ", ".join(sorted(SUPPORTED_EXTENSIONS))
    return f"{known}, the same compressed as .gz except .pdf, and files named README, NEWS, copyright and the like"


def unsupported_reason(path: Path) -> str:
    """Why a file is not read by default: its type, and what is read."""
    return f"{unsupported_type(path)} (supported: {supported_summary()})"


def nothing_to_ingest(paths: Sequence[Path | str], skipped: Sequence[tuple[Path, str]]) -> str:
    """The error for paths that hold no file to read: an operator's script must not take it for success."""
    named = ", ".join(str(p) for p in paths)
    if not skipped:
        return f"{named}: no files to ingest (the directory is empty or holds only hidden files)"
    shown = "; ".join(f"{file}: {why}" for file, why in skipped[:3])
    more = f"; and {len(skipped) - 3:,} more" if len(skipped) > 3 else ""
    return (f"{named}: no files to ingest, {len(skipped):,} skipped ({shown}{more}); "
            f"read by default: {supported_summary()}")


def skipped_summary(skipped: Sequence[tuple[Path | str, str]]) -> list[str]:
    """One line per reason a walk skipped files (``41 files: unsupported file type '.png'``, with the first of
    them), the same reason's files counted rather than listed: a folder of images is one line, not 41."""
    by_reason: dict[str, list[str]] = {}
    for path, why in skipped:
        by_reason.setdefault(why, []).append(str(path))
    return [f"{files[0]}: {why}" if len(files) == 1 else f"{len(files):,} files: {why} ({files[0]}, ...)"
            for why, files in by_reason.items()]


def _read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """The file's bytes, decompressed if it is a .gz file; refused past MAX_FILE_BYTES either way.

    ``limit`` reads at most that many bytes and one more (a caller that only
    needs the start), instead of refusing a larger file.
    """
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise IngestError(f"{path}: the file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,} bytes per file "
                              "(split it into smaller files)")
        with gzip.open(path) if _compressed(path) else path.open("rb") as stream:
            data = stream.read(limit + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # (BadGzipFile is an OSError: first)
        raise IngestError(f"{path}: not a valid gzip file ({exc})") from exc
    except OSError as exc:
        raise IngestError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if len(data) > MAX_FILE_BYTES:
        raise IngestError(f"{path}: decompressed, the file is over the limit of {MAX_FILE_BYTES:,} bytes per file "
                          "(split it into smaller files)")
    return data


def read_text(path: Path, *, errors: str = "strict") -> str:
    """Decode a text file as UTF-8 (BOM dropped, newlines normalised to ``\\n``); a .gz file decompressed.

    ``errors="replace"`` turns invalid bytes into U+FFFD instead of failing.
    """
    if errors not in ("strict", "replace"):
        raise ValueError("errors must be 'strict' or 'replace'")
    data = _read_bytes(path)
    _check_binary(path, data)
    try:
        text = data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise IngestError(
            f"{path}: not valid UTF-8 (byte 0x{data[exc.start]:02x} at byte offset {exc.start}); "
            "convert the file to UTF-8 or ingest it with errors='replace'"
        ) from exc
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise IngestError(f"{path}: the file is empty (or only whitespace); nothing to ingest")
    return text


def _check_lines(path: Path, text: str) -> str:
    """Refuse a line longer than MAX_LINE_CHARS, naming its number and length."""
    for number, line in enumerate(text.split("\n"), start=1):
        if len(line) > MAX_LINE_CHARS:
            raise IngestError(f"{path}: line {number} is {len(line):,} characters long; the limit is "
                              f"{MAX_LINE_CHARS:,} characters per line (wrap the text, or split the file)")
    return text


def _check_path(path: Path) -> None:
    if not path.exists():
        raise IngestError(f"{path}: file does not exist")
    if path.is_dir():
        raise IngestError(
            f"{path}: is a directory; pass the files in it (or use iter_supported_files)"
        )


def _file_type(path: Path, strategy: str | None) -> str:
    file_type = file_type_of(path)
    if file_type is None:
        if strategy is None:
            raise IngestError(f"{path}: {unsupported_reason(path)}; pass a strategy to read it as text")
        if path.name.lower().endswith(".pdf" + COMPRESSED_SUFFIX):
            raise IngestError(f"{path}: a compressed PDF is not read; decompress it first")
        file_type = "markdown"  # an explicit strategy reads unknown extensions as text
    return file_type


def _plain_text(path: Path, file_type: str, errors: str) -> str:
    """The document as plain text, for strategies that work on text."""
    if file_type == "pdf":
        pages, _ = extract_pdf_pages(path)
        return "\n\n".join(pages)
    text = read_text(path, errors=errors)
    if file_type == "html":
        return parse_html(text, str(path)).root.full_text()
    return _check_lines(path, text)


def load_document(
    path: Path,
    *,
    strategy: str | None = None,
    source: str | None = None,
    errors: str = "strict",
    window_tokens: int = 1200,
) -> DocumentTree:
    """Parse one file into a :class:`DocumentTree`.

    ``strategy`` is one of "headings", "clauses", "pages", "code", "window";
    by default it follows the extension: .md/.markdown/.txt → headings (or
    clauses when a line starts with 第N条 / Article N; in plain text without
    Markdown headings, lines standing alone as headings count:
    :mod:`hrag_pg.ingest.plaintext`), .html/.htm → headings,
    .pdf → pages, .py → code.  ``source`` defaults to the path as given.
    """
    path = Path(path)
    if strategy is not None and strategy not in STRATEGIES:
        raise IngestError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    _check_path(path)
    file_type = _file_type(path, strategy)
    source = source if source is not None else str(path)

    tree: DocumentTree
    if file_type == "pdf" and path.stat().st_size > MAX_FILE_BYTES:
        raise IngestError(f"{path}: the file is {path.stat().st_size:,} bytes; the limit is {MAX_FILE_BYTES:,} "
                          "bytes per file (split it into smaller files)")
    if file_type == "pdf" and strategy in (None, "pages"):
        tree, strategy = parse_pdf(path, source), "pages"
    elif file_type == "python" and strategy in (None, "code"):
        tree, strategy = parse_python(_check_lines(path, read_text(path, errors=errors)), source), "code"
    elif strategy == "code":
        raise IngestError(f"{path}: the code strategy reads Python (.py) files only")
    elif file_type == "html" and strategy in (None, "headings"):
        tree, strategy = parse_html(read_text(path, errors=errors), source), "headings"
    elif file_type == "rst" and strategy in (None, "headings"):
        tree, strategy = parse_rst(_check_lines(path, read_text(path, errors=errors)), source), "headings"
    else:
        text = _plain_text(path, file_type, errors)
        if strategy is None:
            strategy = "clauses" if looks_like_clauses(text) else "headings"
        parsers: dict[str, Callable[..., DocumentTree]] = {
            "headings": functools.partial(parse_markdown, plain_headings=_is_plain_text(path, file_type)),
            "clauses": parse_clauses,
            "pages": parse_pages_text,
            "window": functools.partial(parse_window, parent_tokens=window_tokens),
        }
        tree = parsers[strategy](text, source)

    if not has_leaf_text(tree.root):
        raise IngestError(
            f"{path}: the {strategy} strategy found no text blocks in it; nothing to ingest"
        )
    tree.metadata.update({"strategy": strategy, "file_type": file_type})
    return tree


def _is_hidden(path: Path, base: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(base).parts)


def _is_blank(file: Path) -> bool:
    """An empty or whitespace-only file (a package's ``__init__.py``): nothing to ingest, nothing wrong."""
    try:
        size = file.stat().st_size
        if size == 0 or size > 4096:
            return size == 0
        start = _read_bytes(file, limit=4096)  # (a .gz decompressed no further)
        return len(start) <= 4096 and not start.strip()
    except (OSError, IngestError):
        return False  # reading it later reports the problem


def iter_supported_files(paths: Iterable[Path | str], *, any_named_file: bool = False
                         ) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Expand files and directories into (supported files, skipped files with reasons).

    Directories are walked recursively in sorted order; hidden files and
    directories (".git", ".env") are skipped silently, unsupported
    extensions, empty files found in a directory (a package's ``__init__.py``)
    and missing paths are reported.  Each file appears once.
    ``any_named_file``: a file named explicitly is taken whatever its type
    (an explicit strategy reads it as text; files found in a directory still
    have to be supported).
    """
    supported: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    seen: set[Path] = set()

    def consider(file: Path, *, found: bool = False) -> None:
        if file in seen:
            return
        seen.add(file)
        if file_type_of(file) is not None or (any_named_file and not found):
            if found and _is_blank(file):  # named explicitly, an empty file stays an error
                skipped.append((file, "empty file"))
            else:
                supported.append(file)
        else:
            skipped.append((file, unsupported_type(file)))

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in sorted(path.rglob("*")):
                if file.is_file() and not _is_hidden(file, path):
                    consider(file, found=True)
        elif path.is_file():
            consider(path)
        else:
            skipped.append((path, "does not exist"))
    return supported, skipped


__all__ = [
    "DOC_FILE_NAMES",
    "STRATEGIES",
    "SUPPORTED_EXTENSIONS",
    "file_type_of",
    "iter_supported_files",
    "load_document",
    "nothing_to_ingest",
    "read_text",
    "supported_summary",
    "unsupported_reason",
]
