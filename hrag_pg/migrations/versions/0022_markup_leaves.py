"""Revision 0022: markup leaves (text no reader sees, before the first node or after the last) are not search targets.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0022_markup_leaves.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0022_markup_leaves_downgrade.sql")
