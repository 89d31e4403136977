"""Revision 0015: a node's stored size counts the markup between its texts (nodes.subtree_tokens).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0015_separator_tokens.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0015_separator_tokens_downgrade.sql")
