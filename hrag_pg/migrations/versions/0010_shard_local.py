"""Retrieval functions that stay shard-local on Citus: per-document steps the coordinator calls.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0010_shard_local.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0010_shard_local_downgrade.sql")
