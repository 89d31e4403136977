"""Exact text (nodes.separator), a checked vector index, COMMENTs on every function.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0006_exact_text.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0006_exact_text_downgrade.sql")
