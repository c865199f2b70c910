"""delivery event keys: each provider event recorded once per integration

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-25

Providers deliver their delivery webhooks at least once: a retry, or a signed
request replayed within its tolerance, brings an event Herald already
recorded. Each event's identity (the provider's event id, or a digest of the
event) is inserted here with ON CONFLICT DO NOTHING, and only an event whose
key was new is recorded. Retention sweeps the keys by ``created_at``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'delivery_event_keys',
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('integration_id', sa.String(length=24), nullable=False),
        sa.Column('event_key', sa.String(length=64), nullable=False),
        sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(
            'environment_id', 'integration_id', 'event_key', name=op.f('pk_delivery_event_keys')
        ),
    )
    op.create_index('ix_delivery_event_keys_created_at', 'delivery_event_keys', ['created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_delivery_event_keys_created_at', table_name='delivery_event_keys')
    op.drop_table('delivery_event_keys')
