"""Revision 0014: the budget mode values a node replacing taken nodes by what it adds, unless it is a merge.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0014_marginal_merge.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0014_marginal_merge_downgrade.sql")
