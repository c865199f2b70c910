"""realtime presence across API processes

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25

``realtime_processes`` holds one row per API process that holds Inbox
sockets, refreshed by its heartbeat; ``realtime_presence`` one row per
(process, subscriber) while that process holds at least one socket of the
subscriber. A subscriber is online while a live process's row names them
(herald/realtime/presence.py).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0018'
down_revision = '0017'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('realtime_processes',
    sa.Column('id', sa.String(length=120), nullable=False),
    sa.Column('seen_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('announced', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_realtime_processes'))
    )
    with op.batch_alter_table('realtime_processes', schema=None) as batch_op:
        batch_op.create_index('ix_realtime_processes_expires_at', ['expires_at'], unique=False)

    op.create_table('realtime_presence',
    sa.Column('process_id', sa.String(length=120), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('subscriber_id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('process_id', 'environment_id', 'subscriber_id', name=op.f('pk_realtime_presence'))
    )
    with op.batch_alter_table('realtime_presence', schema=None) as batch_op:
        batch_op.create_index('ix_realtime_presence_subscriber', ['environment_id', 'subscriber_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('realtime_presence', schema=None) as batch_op:
        batch_op.drop_index('ix_realtime_presence_subscriber')
    op.drop_table('realtime_presence')
    with op.batch_alter_table('realtime_processes', schema=None) as batch_op:
        batch_op.drop_index('ix_realtime_processes_expires_at')
    op.drop_table('realtime_processes')
