"""throttle windows: the throttle step's count per subscriber and key

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25

A throttle step (herald/engine/steps/throttle.py) counts the runs that reach
it per workflow, step, subscriber and throttle key within a window; the count
lives in one row per scope, counted up by an upsert so that concurrent runs on
several workers see exact counts.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'throttle_windows',
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('scope', sa.String(length=64), nullable=False),
        sa.Column('window_ends_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('environment_id', 'scope', name=op.f('pk_throttle_windows')),
    )
    op.create_index('ix_throttle_windows_window_ends_at', 'throttle_windows', ['window_ends_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_throttle_windows_window_ends_at', table_name='throttle_windows')
    op.drop_table('throttle_windows')
