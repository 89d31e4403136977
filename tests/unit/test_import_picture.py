"""The package's import picture: front ends translate, the operations decide, the repository stores.

Every import counts, those inside functions too (they hide a dependency from
a module's header, not from this test).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "hrag_pg"


def imported_modules(path: Path) -> set[str]:
    """The hrag_pg modules a file imports, as dotted names (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return {name for name in found if name == "hrag_pg" or name.startswith("hrag_pg.")}


def modules_under(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def test_the_helper_sees_imports_inside_functions() -> None:
    found = imported_modules(PACKAGE / "cli" / "core.py")  # (open_hrag imports the facade and migrate inside it)
    assert {"hrag_pg.api", "hrag_pg.migrate"} <= found


@pytest.mark.parametrize(("front_end", "other"), [("cli", "server"), ("server", "cli")])
def test_the_command_line_and_the_server_do_not_import_each_other(front_end: str, other: str) -> None:
    ties = {f"{path.relative_to(PACKAGE)} imports {name}"
            for path in modules_under(front_end) for name in imported_modules(path)
            if name == f"hrag_pg.{other}" or name.startswith(f"hrag_pg.{other}.")}
    assert not ties


@pytest.mark.parametrize("front_end", ["cli", "server", "integrations"])
def test_no_front_end_reaches_past_the_operations_into_the_repository(front_end: str) -> None:
    reaching = {f"{path.relative_to(PACKAGE)} imports {name}"
                for path in modules_under(front_end) for name in imported_modules(path)
                if name.split(".")[1:2] in (["repository"], ["async_repository"], ["statements"], ["queries"])}
    assert not reaching


def test_the_operations_do_not_import_a_front_end() -> None:
    upward = {f"{path.relative_to(PACKAGE)} imports {name}"
              for path in modules_under("operations") for name in imported_modules(path)
              if name.split(".")[1:2] in (["cli"], ["server"], ["integrations"], ["main"], ["api"])}
    assert not upward
