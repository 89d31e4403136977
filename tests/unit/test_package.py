"""The package's lazy top-level exports stay in step with ``__all__``."""

from __future__ import annotations

import hrag_pg


def test_all_lists_exactly_the_lazy_exports() -> None:
    assert sorted(hrag_pg.__all__) == sorted(hrag_pg._EXPORTS)


def test_every_exported_name_resolves() -> None:
    for name in hrag_pg.__all__:
        assert getattr(hrag_pg, name).__name__ == name
