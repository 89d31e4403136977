"""Integrity: check_integrity and repair_integrity.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0004_integrity.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0004_integrity_downgrade.sql")
