"""Source names that do not depend on the current directory.

A document's identity is (collection, source), and its ids derive from it, so
the name must be the same whichever directory ``hrag ingest`` runs from:

* a **file** given directly is named by its file name (``docs/guide.md`` →
  ``guide.md``);
* a file found in a **directory** is named by its path relative to that
  directory, with ``/`` separators (``docs/`` → ``guide.md``, ``api/auth.md``);
* an explicit ``source`` names the one file given, or is the prefix of the
  names of a directory's files (``source="manual"`` → ``manual/api/auth.md``).

So ingesting ``docs/`` and later ``docs/guide.md`` updates the same document.
Two files that would get the same name in one call are refused before
anything is written; across calls, :meth:`hrag_pg.api.HRAG.ingest` refuses a
file whose name is stored from another file that still exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from hrag_pg.errors import IngestError
from hrag_pg.ingest.loaders import iter_supported_files


def name_files(paths: Sequence[str | Path], source: str | None = None, *, any_named_file: bool = False
               ) -> tuple[list[tuple[Path, str]], list[tuple[Path, str]]]:
    """(supported files with their source names, skipped files with reasons).

    ``any_named_file``: see :func:`iter_supported_files` (an explicit strategy).
    """
    given = [Path(p) for p in paths]
    if source is not None:
        if not source.strip():
            raise IngestError("the source name must not be empty")
        if len(given) != 1:
            raise IngestError(
                f"an explicit source names one file or prefixes one directory, but {len(given)} paths were given"
            )
    named: list[tuple[Path, str]] = []
    skipped: list[tuple[Path, str]] = []
    seen: set[Path] = set()
    for path in given:
        files, skip = iter_supported_files([path], any_named_file=any_named_file)
        skipped.extend(skip)
        for file in files:
            key = file.resolve()
            if key in seen:
                continue
            seen.add(key)
            if path.is_dir():
                relative = file.relative_to(path).as_posix()
                name = f"{source.rstrip('/')}/{relative}" if source else relative
            else:
                name = source or file.name
            named.append((file, name))
    _refuse_collisions(named)
    return named, skipped


def _refuse_collisions(named: Iterable[tuple[Path, str]]) -> None:
    owners: dict[str, Path] = {}
    for file, name in named:
        if name in owners:
            raise IngestError(
                f"{owners[name]} and {file} would both be stored as source {name!r}; ingest them in "
                "separate calls with an explicit source (--source) or into different collections"
            )
        owners[name] = file


def old_names(file: Path, new_name: str, stored: Iterable[str], cwd: Path | None = None) -> list[str]:
    """Stored sources that name ``file`` the old way (the path as typed when it was ingested).

    A stored name matches when it is the file's path (absolute, or relative
    to ``cwd``), or when it ends with ``/`` + the new name (``docs/guide.md``
    and ``../docs/guide.md`` for ``guide.md``).  More than one match is for
    the caller to report as ambiguous.
    """
    cwd = cwd or Path.cwd()
    target = file.resolve()
    found = []
    for name in stored:
        if name == new_name or Path(name).name != file.name:
            continue
        path = Path(name)
        same_file = (path if path.is_absolute() else cwd / path).resolve() == target
        if same_file or name.replace("\\", "/").endswith("/" + new_name):
            found.append(name)
    return found
