"""revoked keys found by time; one primary integration per channel

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23

- ``ix_api_keys_revoked_at``: every API process asks once a second for the
  keys revoked since it last looked, to drop them from its key cache.
- ``uq_integrations_one_primary``: at most one primary among the live
  integrations of an (environment, channel). Databases made before it may
  hold several after a race; the highest-priority one (then the most
  recently updated) stays primary, the others are demoted first.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

_integrations = sa.table(
    'integrations',
    sa.column('id', sa.String),
    sa.column('environment_id', sa.String),
    sa.column('channel', sa.String),
    sa.column('primary', sa.Boolean),
    sa.column('deleted', sa.Boolean),
    sa.column('priority', sa.Integer),
    sa.column('updated_at', sa.DateTime),
)


def _demote_extra_primaries() -> None:
    live_primary = sa.and_(_integrations.c.primary.is_(sa.true()), _integrations.c.deleted.is_(sa.false()))
    ranked = (
        sa.select(
            _integrations.c.id,
            sa.func.row_number()
            .over(
                partition_by=(_integrations.c.environment_id, _integrations.c.channel),
                order_by=(_integrations.c.priority.desc(), _integrations.c.updated_at.desc(), _integrations.c.id.desc()),
            )
            .label('rank'),
        )
        .where(live_primary)
        .subquery()
    )
    extra = sa.select(ranked.c.id).where(ranked.c.rank > 1)
    op.execute(_integrations.update().where(_integrations.c.id.in_(extra)).values(primary=False))


def upgrade() -> None:
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index('ix_api_keys_revoked_at', ['revoked_at'], unique=False)

    _demote_extra_primaries()
    with op.batch_alter_table('integrations', schema=None) as batch_op:
        batch_op.create_index(
            'uq_integrations_one_primary',
            ['environment_id', 'channel'],
            unique=True,
            sqlite_where=sa.text('"primary" = 1 AND deleted = 0'),
            postgresql_where=sa.text('"primary" = true AND deleted = false'),
        )


def downgrade() -> None:
    with op.batch_alter_table('integrations', schema=None) as batch_op:
        batch_op.drop_index(
            'uq_integrations_one_primary',
            sqlite_where=sa.text('"primary" = 1 AND deleted = 0'),
            postgresql_where=sa.text('"primary" = true AND deleted = false'),
        )

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index('ix_api_keys_revoked_at')
