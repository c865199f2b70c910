"""autovacuum that keeps up with the job queue (PostgreSQL)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

Jobs are inserted, updated two or three times and finished within seconds,
and the tables behind a trigger grow by thousands of rows a second. With
PostgreSQL's defaults a table is analyzed after 10% of it changed and
vacuumed after 20%: on a large jobs table that leaves millions of dead rows
in the queue's indexes, and on a growing one statistics far older than the
data. These tables are looked at after a thousand changes or 1% of the
table (2% for the append-mostly ones).

SQLite needs nothing: it has no autovacuum to tune and plans from its own
index statistics.
"""
from __future__ import annotations

from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

QUEUE = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.01",
    "autovacuum_analyze_threshold": "1000",
}
GROWING = {"autovacuum_analyze_scale_factor": "0.02", "autovacuum_analyze_threshold": "1000"}
TABLES = {
    "jobs": QUEUE,
    "events": GROWING,
    "notifications": GROWING,
    "messages": GROWING,
    "execution_details": GROWING,
    "subscribers": GROWING,
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, settings in TABLES.items():
        options = ", ".join(f"{name} = {value}" for name, value in settings.items())
        op.execute(f"ALTER TABLE {table} SET ({options})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, settings in TABLES.items():
        op.execute(f"ALTER TABLE {table} RESET ({', '.join(settings)})")
