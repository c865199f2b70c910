"""job queue indexes that stay small: due jobs by run_at, leased jobs by locked_until

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

The claim used one index on (status, run_at) for two conditions joined by
OR (due jobs, and running jobs whose lease ran out), which PostgreSQL can
only answer by collecting every queued job and sorting them: with 100,000
jobs queued by a fan-out, each claim of 100 read and sorted them all
(about 37 ms). Partial indexes hold just the rows each question is about:

- ``ix_jobs_due``: queued and delayed jobs, by run_at (the claim, and how
  long an idle worker may sleep);
- ``ix_jobs_leased``: running jobs, by locked_until (the sweep that takes back
  the jobs of workers that died).

``ix_jobs_status_run_at`` answered only those questions; it goes, and with it
an index update on every change of a job's status.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

DUE = "status IN ('queued', 'delayed')"
LEASED = "status = 'running'"


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index(
            'ix_jobs_due', ['run_at'], unique=False, sqlite_where=sa.text(DUE), postgresql_where=sa.text(DUE)
        )
        batch_op.create_index(
            'ix_jobs_leased', ['locked_until'], unique=False, sqlite_where=sa.text(LEASED), postgresql_where=sa.text(LEASED)
        )
        batch_op.drop_index('ix_jobs_status_run_at')


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_status_run_at', ['status', 'run_at'], unique=False)
        batch_op.drop_index('ix_jobs_leased', sqlite_where=sa.text(LEASED), postgresql_where=sa.text(LEASED))
        batch_op.drop_index('ix_jobs_due', sqlite_where=sa.text(DUE), postgresql_where=sa.text(DUE))
