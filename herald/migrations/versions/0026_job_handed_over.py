"""the attempt that began sending a step's email to an SMTP server without an answer recorded

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-29

An SMTP server cannot be asked later whether it took a message. Before an
email's send begins a worker writes its attempt's number into
``jobs.handed_over``; the attempt's outcome clears it when the server
answered. A job retaken after its worker died (or after a connection lost past
the data) finds it set: the message may have reached the server, and is sent
again with the same Message-ID (docs/delivery.md).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('handed_over', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_column('handed_over')
