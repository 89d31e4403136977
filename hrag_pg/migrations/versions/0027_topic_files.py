"""Revision 0027: the baseline of the topic files (one home per SQL function); changes nothing.

Every current function lives once in a topic file (``sql/*.sql``); the
revisions' files are frozen in ``sql/revisions/``.  A fresh install applies
the topic files and is stamped 0027; 0026 gets the function files applied
again (identical definitions), so the downgrade restores nothing.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

#: The function topic files this revision applies, in order: live (``schema_sql.apply_topic``),
#: or, once a later revision changed one, this revision's copy frozen into
#: ``sql/revisions/0027_<topic>.sql`` (``schema_sql.apply``; revision 0029 froze five, 0030 one).
STEPS = (
    "text.sql",
    "0027_lexical.sql",
    "0027_common.sql",
    "vector_index.sql",
    "0027_search.sql",
    "parent_child.sql",
    "merge.sql",
    "0027_budget.sql",
    "0027_integrity.sql",
    "tenancy.sql",
    "distribution.sql",
    "0027_reembed.sql",
)


def upgrade() -> None:
    schema_sql.apply_steps(op.get_bind(), STEPS)


def downgrade() -> None:
    """Nothing: revision 0026 defines every function exactly as the topic files do."""
