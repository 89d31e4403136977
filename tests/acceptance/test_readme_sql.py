"""The README's psql examples run as written on a database holding the demo's data.

Every ```sql block of README.md is split into statements and each is
executed, unchanged, against the demo collections (ingested with the real
model, as `hrag demo` does).  A statement must succeed and return rows,
except ``check_integrity()``, which returns none on a healthy database.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest

from hrag_pg import db

pytestmark = pytest.mark.model
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_statements() -> list[str]:
    """The SQL statements of every ```sql block, comments dropped, in order."""
    blocks = re.findall(r"^```sql\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)
    statements: list[str] = []
    for block in blocks:
        code = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
        statements.extend(s.strip() for s in code.split(";\n") if s.strip())
    return [s.removesuffix(";") for s in statements]


def test_the_readme_has_sql_examples_without_placeholders() -> None:
    statements = readme_statements()
    assert len(statements) >= 5
    for statement in statements:
        assert "…" not in statement and "..." not in statement and ":'" not in statement, statement


@pytest.mark.parametrize("statement", readme_statements())
def test_each_readme_sql_statement_runs_on_the_demo_data(examples_url: str, statement: str) -> None:
    with psycopg.connect(db.libpq_url(examples_url)) as conn:
        rows = conn.execute(statement).fetchall()
    if "check_integrity" in statement:
        assert rows == []
    else:
        assert rows, f"no rows from: {statement}"
