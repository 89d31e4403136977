"""Revision 0023: identifiers joined by underscores (wait_for, shared_buffers) are lexical search terms, whole.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0023_identifier_terms.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0023_identifier_terms_downgrade.sql")
