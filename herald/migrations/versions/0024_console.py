"""the console: members, their sessions, invites and failed sign-ins; the audit log, append-only

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-29

``members`` are the people who sign in to the console (herald/members),
``console_sessions`` their signed-in browsers (the sha256 of the cookie's
token), ``member_invites`` the one-time links to join (and the first owner's
set-up link), ``sign_in_failures`` the failed sign-ins counted to refuse
guessing. ``audit_entries`` is the audit log (herald/audit): a trigger of the
store refuses every UPDATE of its rows, and every DELETE while the entry's
organization still exists (deleting an organization is the only way its
entries go), on both stores.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0024'
down_revision = '0023'
branch_labels = None
depends_on = None

APPEND_ONLY = "audit entries are append-only"

SQLITE_TRIGGERS = (
    f"""CREATE TRIGGER audit_entries_no_update BEFORE UPDATE ON audit_entries
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END""",
    f"""CREATE TRIGGER audit_entries_no_delete BEFORE DELETE ON audit_entries
    WHEN EXISTS (SELECT 1 FROM organizations WHERE organizations.id = OLD.organization_id)
    BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY}'); END""",
)
POSTGRESQL_TRIGGERS = (
    f"""CREATE FUNCTION audit_entries_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM organizations WHERE organizations.id = OLD.organization_id) THEN
            RETURN OLD;
        END IF;
        RAISE EXCEPTION '{APPEND_ONLY}' USING ERRCODE = 'restrict_violation';
    END $$""",
    """CREATE TRIGGER audit_entries_append_only BEFORE UPDATE OR DELETE ON audit_entries
    FOR EACH ROW EXECUTE FUNCTION audit_entries_append_only()""",
    """CREATE TRIGGER audit_entries_no_truncate BEFORE TRUNCATE ON audit_entries
    FOR EACH STATEMENT EXECUTE FUNCTION audit_entries_append_only()""",
)


def upgrade() -> None:
    op.create_table('members',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=True),
    sa.Column('oidc_subject', sa.String(length=255), nullable=True),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('password_changed_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_members_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_members')),
    sa.UniqueConstraint('email', name=op.f('uq_members_email')),
    sa.UniqueConstraint('oidc_subject', name=op.f('uq_members_oidc_subject'))
    )
    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.create_index('ix_members_organization_id', ['organization_id'], unique=False)

    op.create_table('console_sessions',
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('member_id', sa.String(length=24), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=True),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('client_address', sa.String(length=64), nullable=False),
    sa.Column('user_agent', sa.String(length=300), nullable=False),
    sa.ForeignKeyConstraint(['member_id'], ['members.id'], name=op.f('fk_console_sessions_member_id_members'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('token_hash', name=op.f('pk_console_sessions'))
    )
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.create_index('ix_console_sessions_member_id', ['member_id'], unique=False)
        batch_op.create_index('ix_console_sessions_expires_at', ['expires_at'], unique=False)

    op.create_table('member_invites',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=True),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('created_by', sa.String(length=24), nullable=True),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('used_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_member_invites_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_member_invites')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_member_invites_token_hash'))
    )
    with op.batch_alter_table('member_invites', schema=None) as batch_op:
        batch_op.create_index('ix_member_invites_organization_id', ['organization_id'], unique=False)

    op.create_table('sign_in_failures',
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('client_address', sa.String(length=64), nullable=False),
    sa.Column('at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_sign_in_failures'))
    )
    with op.batch_alter_table('sign_in_failures', schema=None) as batch_op:
        batch_op.create_index('ix_sign_in_failures_email_client_at', ['email', 'client_address', 'at'], unique=False)
        batch_op.create_index('ix_sign_in_failures_at', ['at'], unique=False)

    op.create_table('audit_entries',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=True),
    sa.Column('action', sa.String(length=100), nullable=False),
    sa.Column('actor_type', sa.String(length=16), nullable=False),
    sa.Column('actor_email', sa.String(length=320), nullable=True),
    sa.Column('actor_id', sa.String(length=64), nullable=True),
    sa.Column('actor_environment_id', sa.String(length=24), nullable=True),
    sa.Column('resource_type', sa.String(length=64), nullable=False),
    sa.Column('resource_id', sa.String(length=200), nullable=True),
    sa.Column('changes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_audit_entries'))
    )
    with op.batch_alter_table('audit_entries', schema=None) as batch_op:
        batch_op.create_index('ix_audit_entries_organization_created', ['organization_id', 'created_at', 'id'], unique=False)
    for statement in POSTGRESQL_TRIGGERS if op.get_bind().dialect.name == 'postgresql' else SQLITE_TRIGGERS:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('DROP TRIGGER IF EXISTS audit_entries_no_truncate ON audit_entries')
        op.execute('DROP TRIGGER IF EXISTS audit_entries_append_only ON audit_entries')
        op.execute('DROP FUNCTION IF EXISTS audit_entries_append_only()')
    with op.batch_alter_table('audit_entries', schema=None) as batch_op:
        batch_op.drop_index('ix_audit_entries_organization_created')
    op.drop_table('audit_entries')
    with op.batch_alter_table('sign_in_failures', schema=None) as batch_op:
        batch_op.drop_index('ix_sign_in_failures_at')
        batch_op.drop_index('ix_sign_in_failures_email_client_at')
    op.drop_table('sign_in_failures')
    with op.batch_alter_table('member_invites', schema=None) as batch_op:
        batch_op.drop_index('ix_member_invites_organization_id')
    op.drop_table('member_invites')
    with op.batch_alter_table('console_sessions', schema=None) as batch_op:
        batch_op.drop_index('ix_console_sessions_expires_at')
        batch_op.drop_index('ix_console_sessions_member_id')
    op.drop_table('console_sessions')
    with op.batch_alter_table('members', schema=None) as batch_op:
        batch_op.drop_index('ix_members_organization_id')
    op.drop_table('members')
