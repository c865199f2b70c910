"""subscriber preferences

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

``subscriber_preferences`` holds what each subscriber chose, globally (no
workflow) or for one workflow: enabled, the channels they set, and for the
global one a delivery schedule. The engine reads a subscriber's rows by
``uq_subscriber_preferences_subscriber_workflow`` before a channel step; the
partial index ``uq_subscriber_preferences_subscriber_global`` keeps one global
row per subscriber (a unique index does not compare NULLs).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None

GLOBAL = "workflow_id IS NULL"


def upgrade() -> None:
    op.create_table('subscriber_preferences',
    sa.Column('subscriber_id', sa.String(length=24), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=True),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('channels', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('schedule', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscriber_preferences'))
    )
    with op.batch_alter_table('subscriber_preferences', schema=None) as batch_op:
        batch_op.create_index('uq_subscriber_preferences_subscriber_workflow', ['subscriber_id', 'workflow_id'], unique=True)
        batch_op.create_index(
            'uq_subscriber_preferences_subscriber_global',
            ['subscriber_id'],
            unique=True,
            sqlite_where=sa.text(GLOBAL),
            postgresql_where=sa.text(GLOBAL),
        )


def downgrade() -> None:
    with op.batch_alter_table('subscriber_preferences', schema=None) as batch_op:
        batch_op.drop_index('uq_subscriber_preferences_subscriber_global', sqlite_where=sa.text(GLOBAL), postgresql_where=sa.text(GLOBAL))
        batch_op.drop_index('uq_subscriber_preferences_subscriber_workflow')

    op.drop_table('subscriber_preferences')
