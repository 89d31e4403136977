"""On a single node, the per-document retrieval steps run once for all documents of the hits.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0011_local_set_based.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0011_local_set_based_downgrade.sql")
