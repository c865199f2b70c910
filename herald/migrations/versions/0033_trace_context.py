"""jobs carry the trace they belong to

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-29

With traces on (herald/kit/tracing.py), a trigger's request span is written on
the job that expands its event as a W3C ``traceparent``, and copied onto the
step jobs the expansion makes, so the worker process that runs a step
continues the request's trace. NULL while traces are off, and for every job
written before this revision.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0033'
down_revision = '0032'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('trace_context', sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('trace_context')
