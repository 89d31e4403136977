"""Revision 0013: a leaner hybrid candidate stage (same scores; max(k, 30) vector candidates by default).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0013_lean_hybrid.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0013_lean_hybrid_downgrade.sql")
