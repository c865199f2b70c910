"""translations

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

``translations`` holds Novu's translations: one row per (environment, resource
type, resource id, locale), the resource id being the workflow's identifier, so a
translation has the same key in every environment. ``translation_locales`` keeps
an organization's default and target locales (no row: ``en_US`` and none).
Workflows gain ``is_translation_enabled`` (false for the existing ones): only the
steps of a workflow with it on render ``{{t.key}}`` with the subscriber's locale.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql')


def upgrade() -> None:
    op.create_table('translations',
    sa.Column('resource_type', sa.String(length=16), nullable=False),
    sa.Column('resource_id', sa.String(length=300), nullable=False),
    sa.Column('locale', sa.String(length=16), nullable=False),
    sa.Column('content', JSON, nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_translations'))
    )
    with op.batch_alter_table('translations', schema=None) as batch_op:
        batch_op.create_index(
            'uq_translations_environment_resource_locale',
            ['environment_id', 'resource_type', 'resource_id', 'locale'],
            unique=True,
        )
    op.create_table('translation_locales',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('default_locale', sa.String(length=16), nullable=False),
    sa.Column('target_locales', JSON, nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('organization_id', name=op.f('pk_translation_locales'))
    )
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.add_column(sa.Column('is_translation_enabled', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_column('is_translation_enabled')
    op.drop_table('translation_locales')
    with op.batch_alter_table('translations', schema=None) as batch_op:
        batch_op.drop_index('uq_translations_environment_resource_locale')
    op.drop_table('translations')
