"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

from alembic import op

from hrag_pg import schema_sql

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}

# docs/migrations.md: edit the topic file, apply it here live, and keep the
# previous definitions in sql/revisions/NNNN_name_downgrade.sql.


def upgrade() -> None:
    schema_sql.apply_topic(op.get_bind(), "topic.sql")


def downgrade() -> None:
    schema_sql.apply(op.get_bind(), "NNNN_name_downgrade.sql")
