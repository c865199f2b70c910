"""events on their way to a digest

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24

A digest stays open until the events triggered within its window have reached
it (herald/engine/steps/digest.py). Before it closes it asks for the jobs of
its step, for its subscriber, that a worker has yet to run or is running:
``ix_jobs_digest_arriving`` holds only those, so the question costs a few
index entries however many jobs the table holds, and jobs of workflows without
a digest never enter it.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


ARRIVING = "step_type = 'digest' AND status IN ('queued', 'running')"


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(
            'ix_jobs_digest_arriving',
            ['workflow_id', 'step_id', 'subscriber_id'],
            unique=False,
            sqlite_where=sa.text(ARRIVING),
            postgresql_where=sa.text(ARRIVING),
        )


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_digest_arriving', sqlite_where=sa.text(ARRIVING), postgresql_where=sa.text(ARRIVING))
