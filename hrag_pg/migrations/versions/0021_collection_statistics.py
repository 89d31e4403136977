"""Revision 0021: the lexical statistics per collection, kept by the writers' transactions.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0021_collection_statistics.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0021_collection_statistics_downgrade.sql")
