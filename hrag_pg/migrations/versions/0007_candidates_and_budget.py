"""One candidate stage with a lexical channel (collection statistics), budget-aware retrieve.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0007_candidates_and_budget.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0007_candidates_and_budget_downgrade.sql")
