"""email layouts

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25

``layouts`` holds an environment's email layouts (Novu's /v1/layouts and
/v2/layouts over the same rows). ``uq_layouts_environment_identifier`` keeps
one layout per key in an environment; the partial index
``uq_layouts_environment_default`` keeps at most one default layout in each.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

SQLITE_DEFAULT = "is_default = 1"
POSTGRESQL_DEFAULT = "is_default = true"


def upgrade() -> None:
    op.create_table('layouts',
    sa.Column('identifier', sa.String(length=300), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('editor_type', sa.String(length=16), nullable=False),
    sa.Column('variables', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('is_default', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('is_translation_enabled', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('origin', sa.String(length=32), nullable=False),
    sa.Column('creator_id', sa.String(length=100), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_layouts'))
    )
    with op.batch_alter_table('layouts', schema=None) as batch_op:
        batch_op.create_index('uq_layouts_environment_identifier', ['environment_id', 'identifier'], unique=True)
        batch_op.create_index(
            'uq_layouts_environment_default',
            ['environment_id'],
            unique=True,
            sqlite_where=sa.text(SQLITE_DEFAULT),
            postgresql_where=sa.text(POSTGRESQL_DEFAULT),
        )


def downgrade() -> None:
    with op.batch_alter_table('layouts', schema=None) as batch_op:
        batch_op.drop_index(
            'uq_layouts_environment_default',
            sqlite_where=sa.text(SQLITE_DEFAULT),
            postgresql_where=sa.text(POSTGRESQL_DEFAULT),
        )
        batch_op.drop_index('uq_layouts_environment_identifier')

    op.drop_table('layouts')
