"""webhook endpoints: where an application hears about its messages

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25

Outbound webhooks (herald/webhooks): each environment's endpoints, their
event types, the sealed signing secret, and whether deliveries to them are
failing or have been given up on. Deliveries are jobs of kind ``webhook``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'webhook_endpoints',
        sa.Column('url', sa.Text(), nullable=False),
        sa.Column('description', sa.Text(), nullable=False),
        sa.Column('event_types', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
        sa.Column('secret', sa.String(length=255), nullable=False),
        sa.Column('disabled', sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column('disabled_reason', sa.Text(), nullable=True),
        sa.Column('disabled_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('failing_since', herald.models.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column('id', sa.String(length=24), nullable=False),
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('organization_id', sa.String(length=24), nullable=False),
        sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_endpoints')),
    )
    op.create_index('ix_webhook_endpoints_environment_id', 'webhook_endpoints', ['environment_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_webhook_endpoints_environment_id', table_name='webhook_endpoints')
    op.drop_table('webhook_endpoints')
