"""CSV imports of subscribers: each file's progress and outcome

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-29

``subscriber_imports`` holds one row per file imported from the console's
Subscribers page (herald/subscribers/imports.py): the file's text while it
runs, how many lines are done, how many subscribers were created, updated
and refused, and which lines were refused and why. ``ix_subscribers_environment_id``
serves the console's list and search of subscribers, newest first a page at a time.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0029'
down_revision = '0028'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('subscriber_imports',
    sa.Column('member_email', sa.String(length=320), nullable=True),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('size_bytes', sa.Integer(), nullable=False),
    sa.Column('total_rows', sa.Integer(), nullable=False),
    sa.Column('processed_rows', sa.Integer(), nullable=False),
    sa.Column('created_count', sa.Integer(), nullable=False),
    sa.Column('updated_count', sa.Integer(), nullable=False),
    sa.Column('refused_count', sa.Integer(), nullable=False),
    sa.Column('refused', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('error', sa.String(length=1000), nullable=True),
    sa.Column('finished_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscriber_imports'))
    )
    with op.batch_alter_table('subscriber_imports', schema=None) as batch_op:
        batch_op.create_index('ix_subscriber_imports_environment_created', ['environment_id', 'created_at'], unique=False)
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.create_index('ix_subscribers_environment_id', ['environment_id', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.drop_index('ix_subscribers_environment_id')
    with op.batch_alter_table('subscriber_imports', schema=None) as batch_op:
        batch_op.drop_index('ix_subscriber_imports_environment_created')
    op.drop_table('subscriber_imports')
