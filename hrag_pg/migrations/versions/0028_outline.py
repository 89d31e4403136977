"""Revision 0028: the heading tree as a map: hrag.outline, hrag.children, hrag.node (issue #42).

New functions only (``sql/navigation.sql``); the downgrade drops them.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-10
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply_topic(op.get_bind(), "navigation.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION hrag.node(uuid)")
    op.execute("DROP FUNCTION hrag.children(uuid)")
    op.execute("DROP FUNCTION hrag.outline(text, text, integer)")
    op.execute("DROP FUNCTION hrag._outline(text, text, integer)")
