"""Revision 0030: a retrieval statement checks the question's model against the collection's, in its snapshot.

A reader that remembered a collection's model could embed a question with
it after a reembed (another process) had switched the collection, and rank
the other model's vectors.  ``hrag._checked_collection`` (``sql/common.sql``)
lets each statement refuse that (SQLSTATE HRM01); the caller embeds again.
Reasoning: docs/decisions.md, "A model per collection".

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    schema_sql.apply_topic(op.get_bind(), "common.sql")


def downgrade() -> None:
    op.execute("DROP FUNCTION hrag._checked_collection(text, text, text)")
