"""the inbox: message state, workflow severity, sealed API keys

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

Novu's Inbox API (herald/inbox) reads and changes more of an in-app message
than the v1 feed: whether and when it was archived, when it was first seen,
the step's ``data`` object and the avatar shown beside it. Workflows gain
Novu's ``severity`` (``none`` for the existing ones), which the Inbox counts
unread messages by.

An inbox session may have to prove its subscriber with an HMAC keyed by one of
the environment's API keys. Only a key's sha256 was kept, which cannot key an
HMAC: ``api_keys.sealed_key`` keeps the key sealed under HERALD_SECRET_KEY. It
is empty for the keys made before this revision; those keys cannot check an
HMAC until a new key is made (``herald keys create``).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.add_column(sa.Column('archived', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column('archived_at', herald.models.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column('first_seen_date', herald.models.base.UTCDateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(
            sa.Column(
                'data',
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'),
                nullable=True,
            )
        )
        batch_op.add_column(sa.Column('avatar', sa.String(length=2048), nullable=True))
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.add_column(sa.Column('severity', sa.String(length=16), server_default='none', nullable=False))
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.add_column(sa.Column('sealed_key', sa.String(length=255), nullable=True))
    # A message seen before this revision was first seen no later than its last sighting.
    op.execute(sa.text('UPDATE messages SET first_seen_date = last_seen_date WHERE seen AND last_seen_date IS NOT NULL'))


def downgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_column('sealed_key')
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_column('severity')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_column('avatar')
        batch_op.drop_column('data')
        batch_op.drop_column('first_seen_date')
        batch_op.drop_column('archived_at')
        batch_op.drop_column('archived')
