"""protected environments; idempotency keys per environment

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-29

``environments.protected``: a protected environment takes changes only from
its own API keys (herald/environments/protection.py). Production is protected
in every existing organization, as new organizations make it.

``idempotency_records`` were keyed by (organization, key), so a Production
request reusing a key that Development had used got Development's stored
answer and never ran. They are keyed by (environment, key) now. A record
claimed before this revision cannot say which environment claimed it, so it
is copied to every environment of its organization: a repeat of that request
still replays its answer (in any environment, as before, until it expires
within a day), and keys claimed from now on are the claiming environment's.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0023'
down_revision = '0022'
branch_labels = None
depends_on = None

_RECORD_FIELDS = 'key, body_hash, status, status_code, response_body, content_type, created_at, expires_at'


def upgrade() -> None:
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('protected', sa.Boolean(), server_default=sa.false(), nullable=False))
    op.execute(sa.text("UPDATE environments SET protected = :protected WHERE name = 'Production'").bindparams(protected=True))

    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('environment_id', sa.String(length=24), nullable=True))
        batch_op.drop_constraint('pk_idempotency_records', type_='primary')
    op.execute(
        f'INSERT INTO idempotency_records (environment_id, organization_id, {_RECORD_FIELDS}) '
        f'SELECT environments.id, records.organization_id, '
        + ', '.join(f'records.{field.strip()}' for field in _RECORD_FIELDS.split(','))
        + ' FROM idempotency_records AS records '
        'JOIN environments ON environments.organization_id = records.organization_id '
        'WHERE records.environment_id IS NULL'
    )
    op.execute('DELETE FROM idempotency_records WHERE environment_id IS NULL')
    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.alter_column('environment_id', existing_type=sa.String(length=24), nullable=False)
        batch_op.drop_column('organization_id')
        batch_op.create_primary_key('pk_idempotency_records', ['environment_id', 'key'])


def downgrade() -> None:
    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.add_column(sa.Column('organization_id', sa.String(length=24), nullable=True))
        batch_op.drop_constraint('pk_idempotency_records', type_='primary')
    op.execute(
        'UPDATE idempotency_records SET organization_id = '
        '(SELECT environments.organization_id FROM environments WHERE environments.id = idempotency_records.environment_id)'
    )
    # One record per (organization, key): the latest claim of the key wins.
    op.execute(
        'DELETE FROM idempotency_records WHERE organization_id IS NULL OR EXISTS ('
        'SELECT 1 FROM idempotency_records AS later '
        'WHERE later.organization_id = idempotency_records.organization_id AND later.key = idempotency_records.key '
        'AND (later.created_at > idempotency_records.created_at OR (later.created_at = idempotency_records.created_at '
        'AND later.environment_id > idempotency_records.environment_id)))'
    )
    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.alter_column('organization_id', existing_type=sa.String(length=24), nullable=False)
        batch_op.drop_column('environment_id')
        batch_op.create_primary_key('pk_idempotency_records', ['organization_id', 'key'])

    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.drop_column('protected')
