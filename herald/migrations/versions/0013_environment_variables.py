"""environment variables

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25

Novu's environment variables (herald/environment_variables): one row a key of
an organization, its value for each environment in one JSON object (sealed
when the variable is a secret). Templates read them as ``{{env.KEY}}``.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'environment_variables',
        sa.Column('organization_id', sa.String(length=24), nullable=False),
        sa.Column('key', sa.String(length=256), nullable=False),
        sa.Column('type', sa.String(length=16), nullable=False),
        sa.Column('is_secret', sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column('values', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
        sa.Column('id', sa.String(length=24), nullable=False),
        sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_environment_variables')),
    )
    op.create_index(
        'uq_environment_variables_organization_key', 'environment_variables', ['organization_id', 'key'], unique=True
    )


def downgrade() -> None:
    op.drop_index('uq_environment_variables_organization_key', table_name='environment_variables')
    op.drop_table('environment_variables')
