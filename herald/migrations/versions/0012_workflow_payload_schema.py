"""v2 workflows: payload schema and its validation switch

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

Novu's v2 workflows carry a JSON schema for the trigger payload and a switch
that makes a trigger whose payload does not match it fail (``validatePayload``). The existing workflows
have no schema and validate nothing.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.add_column(sa.Column('validate_payload', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(
            sa.Column(
                'payload_schema',
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'),
                nullable=True,
            )
        )


def downgrade() -> None:
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_column('payload_schema')
        batch_op.drop_column('validate_payload')
