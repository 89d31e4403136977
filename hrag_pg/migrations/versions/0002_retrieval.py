"""Retrieval functions: search_leaves, parent_child, auto_merge_hits, auto_merge, node_text.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0002_retrieval.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0002_retrieval_downgrade.sql")
