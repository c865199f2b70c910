"""subscribers found by the start of their subscriberId, email, phone or name, in any case, on PostgreSQL

Revision ID: 0031
Revises: 0030
Create Date: 2026-11-29

The console's Subscribers search (herald/subscribers/repository.py,
``find_page``) asks for the subscribers whose subscriberId, email, phone, last
name or "first last" starts with what was typed, in any case. Without an index
of each, PostgreSQL read the environment's every subscriber for a search that
matches few. These are btree indexes of the lowered values with
``text_pattern_ops``, which a prefix LIKE uses whatever the database's
collation. SQLite has no use for them (its LIKE takes an index only on NOCASE
columns), so they are PostgreSQL's alone.
"""
from __future__ import annotations

from alembic import op

revision = '0031'
down_revision = '0030'
branch_labels = None
depends_on = None

# name -> the lowered expression, exactly as the search writes it (an expression index is used only for its own text).
EXPRESSIONS = {
    'ix_subscribers_search_subscriber_id': "lower(subscriber_id)",
    'ix_subscribers_search_email': "lower(email)",
    'ix_subscribers_search_phone': "lower(phone)",
    'ix_subscribers_search_last_name': "lower(last_name)",
    'ix_subscribers_search_full_name': "lower(coalesce(first_name, '') || ' ' || coalesce(last_name, ''))",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    for name, expression in EXPRESSIONS.items():
        op.execute(f'CREATE INDEX IF NOT EXISTS {name} ON subscribers (environment_id, ({expression}) text_pattern_ops)')


def downgrade() -> None:
    if op.get_bind().dialect.name != 'postgresql':
        return
    for name in EXPRESSIONS:
        op.execute(f'DROP INDEX IF EXISTS {name}')
