"""Revision 0017: hrag check --repair per document, so it works on Citus (hrag._repair_document).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0017_repair_per_document.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0017_repair_per_document_downgrade.sql")
