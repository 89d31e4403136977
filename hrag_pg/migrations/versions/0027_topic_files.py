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

#: The function topic files this revision applies live (``schema_sql.apply_topic``);
#: a later revision that changes one of them freezes this revision's copy into
#: ``sql/revisions/0027_<topic>.sql`` and names that here instead.
TOPICS = (
    "text.sql",
    "lexical.sql",
    "common.sql",
    "vector_index.sql",
    "search.sql",
    "parent_child.sql",
    "merge.sql",
    "budget.sql",
    "integrity.sql",
    "tenancy.sql",
    "distribution.sql",
    "reembed.sql",
)


def upgrade() -> None:
    for topic in TOPICS:
        schema_sql.apply_topic(op.get_bind(), topic)


def downgrade() -> None:
    """Nothing: revision 0026 defines every function exactly as the topic files do."""
