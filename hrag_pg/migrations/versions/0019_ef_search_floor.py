"""Revision 0019: the ANN step searches at least 100 candidates deep (hrag.ef_search).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0019_ef_search_floor.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0019_ef_search_floor_downgrade.sql")
