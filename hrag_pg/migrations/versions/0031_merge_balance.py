"""Revision 0031: the budget mode merges a level only where its evidence is spread over its children.

Above the leaves, a node (a chapter over articles) is a merge only if its
second-best child holds ``hrag.auto_merge_balance`` (0.3) of its best
child's evidence; groups, which ingestion made, are no level.  Reasoning:
docs/decisions.md, "Budget mode: a level merges where its evidence is spread".

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply_topic(op.get_bind(), "budget.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0031_merge_balance_downgrade.sql")
