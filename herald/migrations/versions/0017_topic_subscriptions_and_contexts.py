"""topic subscriptions (Novu v2) and contexts

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-25

Novu's v2 topic routes speak of subscriptions rather than members: each has
an identifier (``tk_<topicKey>:si_<subscriberId>`` unless the caller names
one), an optional name, workflow preferences and context keys, and its
creation and update times. They are kept on the v1 membership rows, so both
APIs read and change the same data; the existing rows get the default
identifier and their topic's times.

``contexts`` holds Novu's contexts (``type`` + ``id``, with a ``data``
object), which a trigger's ``context`` names and which each message records
in ``contextKeys``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def upgrade() -> None:
    with op.batch_alter_table('topic_subscribers', schema=None) as batch_op:
        batch_op.add_column(sa.Column('identifier', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('name', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('preferences', JSON, nullable=True))
        batch_op.add_column(sa.Column('context_keys', JSON, nullable=True))
        batch_op.add_column(sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=True))
    op.execute(
        sa.text(
            "UPDATE topic_subscribers SET identifier = 'tk_' || topic_key || :separator || external_subscriber_id, "
            "created_at = (SELECT topics.created_at FROM topics WHERE topics.id = topic_subscribers.topic_id), "
            "updated_at = (SELECT topics.created_at FROM topics WHERE topics.id = topic_subscribers.topic_id)"
        ).bindparams(separator=':si_')
    )
    with op.batch_alter_table('topic_subscribers', schema=None) as batch_op:
        batch_op.create_index('uq_topic_subscribers_topic_identifier', ['topic_id', 'identifier'], unique=True)

    op.create_table(
        'contexts',
        sa.Column('type', sa.String(length=100), nullable=False),
        sa.Column('key', sa.String(length=100), nullable=False),
        sa.Column('data', JSON, nullable=False),
        sa.Column('id', sa.String(length=24), nullable=False),
        sa.Column('environment_id', sa.String(length=24), nullable=False),
        sa.Column('organization_id', sa.String(length=24), nullable=False),
        sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_contexts')),
    )
    with op.batch_alter_table('contexts', schema=None) as batch_op:
        batch_op.create_index('uq_contexts_environment_type_key', ['environment_id', 'type', 'key'], unique=True)


def downgrade() -> None:
    with op.batch_alter_table('contexts', schema=None) as batch_op:
        batch_op.drop_index('uq_contexts_environment_type_key')
    op.drop_table('contexts')
    with op.batch_alter_table('topic_subscribers', schema=None) as batch_op:
        batch_op.drop_index('uq_topic_subscribers_topic_identifier')
        batch_op.drop_column('updated_at')
        batch_op.drop_column('created_at')
        batch_op.drop_column('context_keys')
        batch_op.drop_column('preferences')
        batch_op.drop_column('name')
        batch_op.drop_column('identifier')
