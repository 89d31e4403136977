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
A file already stored in the collection under another name (``docs/`` named
it ``api/auth.md``; ``docs/api/auth.md`` given alone would be ``auth.md``)
keeps the name it is stored under, unless ``source`` is given: one file, one
document, whichever way it is named on the command line.
Two files that would get the same name in one call are refused before
anything is written; across calls, :meth:`hrag_pg.api.HRAG.ingest` refuses a
file whose name is stored from another file that still exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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


def keep_stored_names(named: Sequence[tuple[Path, str]], stored_from: Mapping[str, str]
                      ) -> list[tuple[Path, str]]:
    """``named`` with each file already stored under another name given that name back.

    ``stored_from`` maps stored source names to the file each was read from
    (resolved paths, as :func:`hrag_pg.operations.writing._load_file` records them).  A file
    keeps its name by today's rule when that name is among its stored ones,
    or when it is stored under several names (no way to choose), or when the
    stored name is what another file of this call is named.
    """
    by_file: dict[str, list[str]] = {}
    for name, file_path in stored_from.items():
        by_file.setdefault(file_path, []).append(name)
    taken = {name for _, name in named}
    kept: list[tuple[Path, str]] = []
    for file, name in named:
        stored = by_file.get(str(file.resolve()), [])
        if len(stored) == 1 and stored[0] != name and stored[0] not in taken:
            name = stored[0]
        kept.append((file, name))
    return kept


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
