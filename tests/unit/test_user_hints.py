"""The hints hrag-pg prints name a command that runs: a shell can find it, an installer can install it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from hrag_pg.cli.core import typed_command
from hrag_pg.errors import install_extra

ROOT = Path(__file__).resolve().parents[2]


def test_a_hint_names_the_venvs_hrag_when_path_does_not_find_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """After `make demo`, .venv/bin is not on PATH: "Try: hrag query" would fail; ".venv/bin/hrag query" runs."""
    script = tmp_path / ".venv" / "bin" / "hrag"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(script), "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert typed_command() == ".venv/bin/hrag"
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert typed_command() == "hrag"
    monkeypatch.setattr(sys, "argv", ["-c"])
    assert typed_command().endswith(" -m hrag_pg")


def test_install_hints_name_extras_this_checkout_defines_and_no_package_index_name() -> None:
    """hrag-pg is installed from its checkout: `pip install 'hrag-pg[embed]'` would ask an index that has no
    such package.  Every extra the README or a message names is one pyproject.toml defines."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+) = \[", section, re.M))  # (tomllib is Python 3.11's; 3.10 is supported)
    assert {"embed", "multilingual", "embedded", "serve"} <= extras
    assert install_extra("serve") == "`pip install '.[serve]'` in the hrag-pg checkout"
    sources = [p.read_text(encoding="utf-8") for p in (ROOT / "hrag_pg").rglob("*.py")]
    assert not [s for s in sources if "'hrag-pg[" in s or "hrag-pg[serve]" in s]
    named = {extra for line in re.findall(r"pip install '\.\[([^\]]+)\]'", (ROOT / "README.md").read_text())
             for extra in line.split(",")}
    named |= set(re.findall(r"install_extra\(['\"]([\w-]+)['\"]\)", "\n".join(sources)))
    assert named and named <= extras, named - extras
