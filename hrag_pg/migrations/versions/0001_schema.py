"""Schema: hrag.config, hrag.documents, hrag.nodes and their indexes.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import context, op

from hrag_pg import schema_sql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    dim = context.config.attributes.get("embedding_dim")
    schema_sql.apply(op.get_bind(), "0001_schema.sql", embedding_dim=dim)


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0001_schema_downgrade.sql")
