"""Revision 0029: scores read above the question's background; granularity by evidence (issue #49).

Each document keeps the sum of its search targets' unit vectors, summed per
collection with the other statistics; ``hrag.search_hybrid`` reads the cosine
above the question's mean cosine with the collection, which replaces the
hand-set per-model ``vector_baseline``.  The modes weigh hits by their share
of the best score.  Reasoning: docs/decisions.md, "Scores above the
question's background".

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

#: The function topic files this revision changes, in the order they are applied: live
#: (``schema_sql.apply_topic``), or, once a later revision changed one, this revision's copy frozen
#: into ``sql/revisions/0029_<topic>.sql`` (``schema_sql.apply``; revision 0031 froze budget.sql).
STEPS = ("lexical.sql", "search.sql", "0029_budget.sql", "integrity.sql", "reembed.sql")


def upgrade() -> None:
    schema_sql.apply(op.get_bind(), "0029_question_background.sql")
    schema_sql.apply_steps(op.get_bind(), STEPS)
    schema_sql.apply(op.get_bind(), "0029_question_background_sums.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "0029_question_background_downgrade.sql")
