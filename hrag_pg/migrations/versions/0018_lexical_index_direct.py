"""Revision 0018: the lexical index takes new rows directly, no GIN pending list (fastupdate = off).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0018_lexical_index_direct.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0018_lexical_index_direct_downgrade.sql")
