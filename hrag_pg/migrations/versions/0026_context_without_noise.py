"""Revision 0026: the budget mode stops when evidence runs out; questions without a vector; one-trip contexts.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0026_context_without_noise.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0026_context_without_noise_downgrade.sql")
