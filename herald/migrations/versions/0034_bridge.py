"""code-first workflows: a workflow's origin, and the environment's bridge URL

Revision ID: 0034
Revises: 0033
Create Date: 2026-11-29

Workflows written with Novu's framework live in the team's own app (the
"bridge"); ``novu sync`` stores them with ``origin = 'external'`` and records
the bridge's URL on the environment, where the engine calls it to render each
step (herald/bridge). Every workflow made before this is Herald's own
(``novu-cloud``).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0034'
down_revision = '0033'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.add_column(sa.Column('origin', sa.String(length=32), nullable=False, server_default='novu-cloud'))
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('bridge_url', sa.String(length=2048), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.drop_column('bridge_url')
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_column('origin')
