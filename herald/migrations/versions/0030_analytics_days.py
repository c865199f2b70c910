"""messages counted by ten minutes and by day for the console's Analytics page

Revision ID: 0030
Revises: 0029
Create Date: 2026-11-29

``analytics_counts`` holds an environment's messages counted by ten minutes
(UTC; a day that ended as one), workflow, channel, provider and status;
``analytics_days`` the subscribers sent a message on each day that ended;
``analytics_progress`` how far the messages are counted (herald/analytics).
Messages are counted once, so the page does not read a month of them at
every view.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0030'
down_revision = '0029'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('analytics_progress',
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('counted_until', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('environment_id', name=op.f('pk_analytics_progress'))
    )
    op.create_table('analytics_counts',
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('period', sa.String(length=16), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('provider_id', sa.String(length=100), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('messages', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('environment_id', 'period', 'workflow_id', 'channel', 'provider_id', 'status', name=op.f('pk_analytics_counts'))
    )
    op.create_table('analytics_days',
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('day', sa.String(length=10), nullable=False),
    sa.Column('subscribers', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('environment_id', 'day', name=op.f('pk_analytics_days'))
    )


def downgrade() -> None:
    op.drop_table('analytics_days')
    op.drop_table('analytics_counts')
    op.drop_table('analytics_progress')
