"""Revision 0012: a cheaper candidate stage and budget step (same selection, fewer lookups).

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0012_fast_auto.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0012_fast_auto_downgrade.sql")
