"""integration health: the circuit breaker of provider failover

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

A row per integration that has failed since it last succeeded: the transient
failures within the breaker's window, since when it has been failing, until
when it is skipped, and the claim of the one message that probes it after its
cool-down (herald/engine/breaker.py). Workers update it with single atomic
statements; the integration routes show it as ``health``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'integration_health',
        sa.Column('integration_id', sa.String(length=24), nullable=False),
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('failures', sa.Integer(), nullable=False),
        sa.Column('window_started_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('consecutive_failures', sa.Integer(), nullable=False),
        sa.Column('failing_since', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('skipped_until', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('probe_until', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('last_error', sa.String(length=1000), nullable=True),
        sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('integration_id', name=op.f('pk_integration_health')),
    )


def downgrade() -> None:
    op.drop_table('integration_health')
