"""Revision 0024: the budget mode judges a merge by the share of a node's tokens its hits cover, not of its children.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0024_merge_by_hit_tokens.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0024_merge_by_hit_tokens_downgrade.sql")
