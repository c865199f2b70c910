"""single sign-on begun in a browser and not finished yet (its state, nonce and PKCE verifier)

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-29

``sso_sign_ins`` holds what the console needs to finish an OpenID Connect
sign-in when the browser comes back from the identity provider: the row is
named by the sha256 of the state, deleted when the sign-in finishes (a state
works once) and swept when it lapses (herald/members/sso.py).
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import herald.models.base

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('sso_sign_ins',
    sa.Column('state_hash', sa.String(length=64), nullable=False),
    sa.Column('nonce', sa.String(length=64), nullable=False),
    sa.Column('code_verifier', sa.String(length=128), nullable=False),
    sa.Column('next_path', sa.String(length=500), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('state_hash', name=op.f('pk_sso_sign_ins'))
    )
    with op.batch_alter_table('sso_sign_ins', schema=None) as batch_op:
        batch_op.create_index('ix_sso_sign_ins_expires_at', ['expires_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('sso_sign_ins', schema=None) as batch_op:
        batch_op.drop_index('ix_sso_sign_ins_expires_at')
    op.drop_table('sso_sign_ins')
