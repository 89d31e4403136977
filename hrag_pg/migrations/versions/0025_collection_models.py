"""Revision 0025: every collection records its embedding model; hrag reembed switches it in place.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0025_collection_models.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0025_collection_models_downgrade.sql")
