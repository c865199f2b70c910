"""messages newest first within an environment

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24

GET /v1/messages lists an environment's messages newest first (created_at,
then id). With no index in that order, PostgreSQL read every message of the
environment and sorted them for each page: 155 ms for one page of an
environment holding 270,000 messages, growing with every message stored.
``ix_messages_environment_created`` reads a page from the newest end and stops,
with or without a channel given.

``ix_messages_subscriber_channel_created`` gains ``id`` too, so that it holds
a subscriber's inbox in the feed's full order (created_at, then id). Without
it, SQLite, which has no statistics to tell how few messages one subscriber
has, preferred the new index for the inbox feed because that one needs no
sort: a scan of the whole environment for every page of every inbox.
"""
from __future__ import annotations

from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


INBOX = 'ix_messages_subscriber_channel_created'


def upgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index(INBOX)
        batch_op.create_index(INBOX, ['subscriber_id', 'channel', 'created_at', 'id'], unique=False)
        batch_op.create_index('ix_messages_environment_created', ['environment_id', 'created_at', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('ix_messages_environment_created')
        batch_op.drop_index(INBOX)
        batch_op.create_index(INBOX, ['subscriber_id', 'channel', 'created_at'], unique=False)
