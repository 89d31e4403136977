"""The service soak, small: ``bench/soak.py`` with three readers, a writer, a reembed and a PostgreSQL restart.

The full run (8 readers, 3,000 requests, all five regulations) is a
benchmark; its figures are on docs/guarantees.md.  This one runs the same
code on two documents, with the real models, on its own embedded PostgreSQL.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # after the installed packages: bench/ holds generic names (common, run)

import soak  # noqa: E402

pytestmark = pytest.mark.model


def test_a_small_soak_answers_with_one_model_loses_nothing_errs_clearly_and_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HRAG_SERVER_TOKEN", soak.TOKEN)
    out = tmp_path / "soak.md"
    code = soak.main(["--requests", "240", "--documents", "2", "--http-readers", "2", "--mcp-readers", "1",
                      "--data-dir", str(tmp_path / "pg"), "--out", str(out), "--max-seconds", "600"])
    report = out.read_text(encoding="utf-8")
    assert "| answers that mixed models (neither model's answer) | 0 |" in report, report
    assert "| documents lost | 0 |" in report, report
    assert "| errors that were not clear (a 500, a trace, not JSON, a dead session) | 0 |" in report, report
    assert "| collection's model at the end | multilingual-e5-small-q4 |" in report, report
    assert code == 0, report
