"""The psql examples of the README and of docs/sql.md run as written on a database holding the demo's data.

Every ```sql block of README.md and docs/sql.md is split into statements and each is
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
REPO = Path(__file__).resolve().parents[2]
#: The pages whose ```sql blocks are psql examples.
PAGES = (REPO / "README.md", REPO / "docs" / "sql.md")


def readme_statements() -> list[str]:
    """The SQL statements of every ```sql block of the pages, comments dropped, in order."""
    blocks = [block for page in PAGES
              for block in re.findall(r"^```sql\n(.*?)^```", page.read_text(encoding="utf-8"), flags=re.S | re.M)]
    statements: list[str] = []
    for block in blocks:
        code = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
        statements.extend(s.strip() for s in code.split(";\n") if s.strip())
    return [s.removesuffix(";") for s in statements]


def test_the_readme_and_the_psql_page_have_sql_examples_without_placeholders() -> None:
    for page in PAGES:
        assert re.search(r"^```sql\n", page.read_text(encoding="utf-8"), flags=re.M), f"{page.name}: no sql block"
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
