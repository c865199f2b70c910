"""spent signature tokens: a provider's signature that does not cover the body is taken once

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27

Mailgun signs its webhooks' timestamp and token, not their body: a captured
signature would carry any body within the timestamp's tolerance. The token of
each such signature is inserted here with ON CONFLICT DO NOTHING, and a
request whose token is already here is refused. Retention deletes a token
once its signature's timestamp is out of the tolerance (``expires_at``).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'spent_signature_tokens',
        sa.Column('token', sa.String(length=64), nullable=False),
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('integration_id', sa.String(length=24), nullable=False),
        sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('token', name=op.f('pk_spent_signature_tokens')),
    )
    op.create_index('ix_spent_signature_tokens_expires_at', 'spent_signature_tokens', ['expires_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_spent_signature_tokens_expires_at', table_name='spent_signature_tokens')
    op.drop_table('spent_signature_tokens')
