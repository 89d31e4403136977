"""Distributable keys (nodes keyed by document and id) and hrag.distribute() for Citus.

Revision ID: 0009
Revises: 0007
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0009"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0009_distributable.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0009_distributable_downgrade.sql")
