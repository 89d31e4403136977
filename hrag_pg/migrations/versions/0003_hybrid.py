"""Hybrid scoring: lexical_terms, lexical_score, search_hybrid.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0003_hybrid.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0003_hybrid_downgrade.sql")
