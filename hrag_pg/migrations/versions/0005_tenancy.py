"""Tenant isolation: row-level security by collection, tenant and reader roles.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0005_tenancy.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0005_tenancy_downgrade.sql")
