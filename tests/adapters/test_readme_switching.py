"""The "Switching from ParentDocumentRetriever / AutoMergingRetriever" snippets (docs/switching.md) run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hrag_pg import db
from hrag_pg.api import HRAG

PAGE = Path(__file__).resolve().parents[2] / "docs" / "switching.md"

pytestmark = pytest.mark.model


def after_snippets() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith("# Switching from ParentDocumentRetriever / AutoMergingRetriever")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)
    runnable = [b for b in blocks if b.startswith("# After:")]
    assert len(runnable) == 2, "one runnable block per framework"
    return runnable


def test_the_switching_snippets_run_offline_from_two_directories_and_store_each_document_once(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(db.ENV_URL, db_url)
    for where in ("first", "second"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        namespace: dict[str, object] = {"__name__": "readme"}
        for block in after_snippets():
            exec(compile(block, f"docs/switching.md ({block.splitlines()[0]})", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Within 14 days" in out and "billing.md" in out
    sources = sorted(s.source for s in HRAG(db_url).sources("switching"))
    assert sources == ["billing.md", "support.md"]
