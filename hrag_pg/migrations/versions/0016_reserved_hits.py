"""Revision 0016: the best hits keep room in the budget mode (hrag.auto_reserved_hits).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0016_reserved_hits.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0016_reserved_hits_downgrade.sql")
