"""a message's delivery status, as its provider reports it

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-25

A message's ``status`` says what Herald did (sent to the provider, or failed
to); providers' webhooks (herald/deliveries/inbound.py) say what became of it
after: delivered, bounced, dropped, complained, opened, clicked. That is kept
apart, in ``delivery_status`` and the time the provider gave it, so the spec's
``status`` keeps its meaning. Both are empty until a provider reports.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('delivery_status', sa.String(length=16), nullable=True))
        batch_op.add_column(
            sa.Column('delivery_status_at', herald.models.base.UTCDateTime(timezone=True), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('delivery_status_at')
        batch_op.drop_column('delivery_status')
