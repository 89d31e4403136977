"""Revision 0020: the lexical channel finds and scores leaves by term hashes.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0020_lexical_hashes.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0020_lexical_hashes_downgrade.sql")
