"""webhook queue: webhook deliveries wait apart from workflow jobs, by endpoint; endpoints pause while they fail

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-29

Webhook deliveries and workflow jobs were claimed from one queue, oldest
first: 18,000 deliveries queued for a slow endpoint held a new trigger's step
for 110 s. Now:

- ``ix_jobs_due`` holds the waiting jobs other than webhook deliveries (the
  workflow claim reads it, and nothing else has to be read past);
- ``ix_jobs_webhook_due`` holds the waiting webhook deliveries by endpoint and
  due time (``jobs.endpoint_id``, new): each endpoint's queue is a range of it,
  so a worker claims a few of each endpoint's deliveries and skips an endpoint
  that is paused;
- ``webhook_endpoints.paused_until``: an endpoint whose deliveries fail is
  paused, then tried with one delivery, instead of once per event.

The deliveries already queued get their endpoint from their ``data``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0025'
down_revision = '0024'
branch_labels = None
depends_on = None

WAITING = "status IN ('queued', 'delayed')"
DUE = "status IN ('queued', 'delayed') AND kind <> 'webhook'"
WEBHOOK_DUE = "kind = 'webhook' AND status IN ('queued', 'delayed')"


def upgrade() -> None:
    op.add_column('jobs', sa.Column('endpoint_id', sa.String(length=24), nullable=True))
    op.add_column(
        'webhook_endpoints', sa.Column('paused_until', herald.models.base.UTCDateTime(timezone=True), nullable=True)
    )
    # Deliveries not yet finished: found through ix_jobs_webhook_updated (0021).
    if op.get_bind().dialect.name == 'postgresql':
        endpoint = "data->>'endpointId'"
    else:
        endpoint = "json_extract(data, '$.endpointId')"
    op.execute(
        f"UPDATE jobs SET endpoint_id = {endpoint} "
        "WHERE kind = 'webhook' AND status IN ('queued', 'delayed', 'running')"
    )
    op.drop_index('ix_jobs_due', table_name='jobs', sqlite_where=sa.text(WAITING), postgresql_where=sa.text(WAITING))
    op.create_index('ix_jobs_due', 'jobs', ['run_at'], unique=False, sqlite_where=sa.text(DUE), postgresql_where=sa.text(DUE))
    op.create_index(
        'ix_jobs_webhook_due',
        'jobs',
        ['endpoint_id', 'run_at'],
        unique=False,
        sqlite_where=sa.text(WEBHOOK_DUE),
        postgresql_where=sa.text(WEBHOOK_DUE),
    )


def downgrade() -> None:
    op.drop_index('ix_jobs_webhook_due', table_name='jobs', sqlite_where=sa.text(WEBHOOK_DUE), postgresql_where=sa.text(WEBHOOK_DUE))
    op.drop_index('ix_jobs_due', table_name='jobs', sqlite_where=sa.text(DUE), postgresql_where=sa.text(DUE))
    op.create_index('ix_jobs_due', 'jobs', ['run_at'], unique=False, sqlite_where=sa.text(WAITING), postgresql_where=sa.text(WAITING))
    with op.batch_alter_table('webhook_endpoints', schema=None) as batch_op:
        batch_op.drop_column('paused_until')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('endpoint_id')
