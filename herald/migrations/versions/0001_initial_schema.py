"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-22
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql

import herald.models.base

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('events',
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=False),
    sa.Column('trigger_identifier', sa.String(length=300), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('steps', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('recipients', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('overrides', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('actor', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('tenant', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('context', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('rejected_recipients', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('status', sa.String(length=32), nullable=False),
    sa.Column('error_text', sa.Text(), nullable=True),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('uq_events_environment_transaction', ['environment_id', 'transaction_id'], unique=True)

    op.create_table('execution_details',
    sa.Column('job_id', sa.String(length=24), nullable=True),
    sa.Column('notification_id', sa.String(length=24), nullable=True),
    sa.Column('subscriber_id', sa.String(length=24), nullable=True),
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('channel', sa.String(length=32), nullable=True),
    sa.Column('provider_id', sa.String(length=100), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('detail', sa.Text(), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('raw', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('is_retry', sa.Boolean(), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_execution_details'))
    )
    with op.batch_alter_table('execution_details', schema=None) as batch_op:
        batch_op.create_index('ix_execution_details_job', ['job_id'], unique=False)
        batch_op.create_index('ix_execution_details_notification', ['notification_id'], unique=False)

    op.create_table('idempotency_records',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('body_hash', sa.String(length=64), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('response_body', sa.Text(), nullable=True),
    sa.Column('content_type', sa.String(length=100), nullable=True),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('expires_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('organization_id', 'key', name=op.f('pk_idempotency_records'))
    )
    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_idempotency_records_expires_at'), ['expires_at'], unique=False)

    op.create_table('integrations',
    sa.Column('provider_id', sa.String(length=100), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('identifier', sa.String(length=200), nullable=False),
    sa.Column('credentials', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('configurations', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('conditions', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('active', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('primary', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('priority', sa.Integer(), nullable=False),
    sa.Column('deleted', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('deleted_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('deleted_by', sa.String(length=100), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_integrations'))
    )
    with op.batch_alter_table('integrations', schema=None) as batch_op:
        batch_op.create_index('ix_integrations_environment_channel', ['environment_id', 'channel'], unique=False)
        batch_op.create_index('ix_integrations_organization_active', ['organization_id', 'active'], unique=False)
        batch_op.create_index('uq_integrations_environment_identifier', ['environment_id', 'identifier'], unique=True, sqlite_where=sa.text('deleted = 0'), postgresql_where=sa.text('deleted = false'))

    op.create_table('jobs',
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('event_id', sa.String(length=24), nullable=False),
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=True),
    sa.Column('notification_id', sa.String(length=24), nullable=True),
    sa.Column('subscriber_id', sa.String(length=24), nullable=True),
    sa.Column('parent_id', sa.String(length=24), nullable=True),
    sa.Column('step_id', sa.String(length=64), nullable=True),
    sa.Column('step_type', sa.String(length=32), nullable=True),
    sa.Column('step_index', sa.Integer(), nullable=True),
    sa.Column('run_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('digest_key', sa.String(length=255), nullable=True),
    sa.Column('merged_into', sa.String(length=24), nullable=True),
    sa.Column('locked_until', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('locked_by', sa.String(length=100), nullable=True),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('result', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('error_text', sa.Text(), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_environment_transaction', ['environment_id', 'transaction_id'], unique=False)
        batch_op.create_index('ix_jobs_merged_into', ['merged_into'], unique=False)
        batch_op.create_index('ix_jobs_notification', ['notification_id'], unique=False)
        batch_op.create_index('ix_jobs_status_run_at', ['status', 'run_at'], unique=False)
        batch_op.create_index('uq_jobs_open_digest', ['workflow_id', 'step_id', 'subscriber_id', 'digest_key'], unique=True, sqlite_where=sa.text("status = 'delayed' AND step_type = 'digest'"), postgresql_where=sa.text("status = 'delayed' AND step_type = 'digest'"))

    op.create_table('messages',
    sa.Column('notification_id', sa.String(length=24), nullable=False),
    sa.Column('subscriber_id', sa.String(length=24), nullable=False),
    sa.Column('job_id', sa.String(length=24), nullable=True),
    sa.Column('delivery_key', sa.String(length=255), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=True),
    sa.Column('message_template_id', sa.String(length=64), nullable=True),
    sa.Column('template_identifier', sa.String(length=300), nullable=True),
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('channel', sa.String(length=16), nullable=False),
    sa.Column('subject', sa.Text(), nullable=True),
    sa.Column('title', sa.Text(), nullable=True),
    sa.Column('content', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('cta', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('overrides', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=True),
    sa.Column('phone', sa.String(length=64), nullable=True),
    sa.Column('direct_webhook_url', sa.String(length=2048), nullable=True),
    sa.Column('provider_id', sa.String(length=100), nullable=True),
    sa.Column('device_tokens', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('feed_id', sa.String(length=24), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('error_id', sa.String(length=100), nullable=True),
    sa.Column('error_text', sa.Text(), nullable=True),
    sa.Column('seen', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('read', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('last_seen_date', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('last_read_date', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('delivered_at', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('snoozed_until', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('context_keys', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('provider_message_id', sa.String(length=255), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_messages'))
    )
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.create_index('ix_messages_environment_transaction', ['environment_id', 'transaction_id'], unique=False)
        batch_op.create_index('ix_messages_subscriber_channel_created', ['subscriber_id', 'channel', 'created_at'], unique=False)
        batch_op.create_index('uq_messages_job_delivery', ['job_id', 'delivery_key'], unique=True)

    op.create_table('notification_groups',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notification_groups'))
    )
    with op.batch_alter_table('notification_groups', schema=None) as batch_op:
        batch_op.create_index('ix_notification_groups_environment', ['environment_id', 'name'], unique=False)

    op.create_table('notifications',
    sa.Column('event_id', sa.String(length=24), nullable=False),
    sa.Column('workflow_id', sa.String(length=24), nullable=False),
    sa.Column('subscriber_id', sa.String(length=24), nullable=False),
    sa.Column('transaction_id', sa.String(length=255), nullable=False),
    sa.Column('channels', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('to', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('payload', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notifications'))
    )
    with op.batch_alter_table('notifications', schema=None) as batch_op:
        batch_op.create_index('ix_notifications_environment_created', ['environment_id', 'created_at'], unique=False)
        batch_op.create_index('ix_notifications_environment_transaction', ['environment_id', 'transaction_id'], unique=False)
        batch_op.create_index('uq_notifications_event_subscriber', ['event_id', 'subscriber_id'], unique=True)

    op.create_table('organizations',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_organizations'))
    )
    op.create_table('subscribers',
    sa.Column('subscriber_id', sa.String(length=255), nullable=False),
    sa.Column('first_name', sa.String(length=255), nullable=True),
    sa.Column('last_name', sa.String(length=255), nullable=True),
    sa.Column('email', sa.String(length=320), nullable=True),
    sa.Column('phone', sa.String(length=64), nullable=True),
    sa.Column('avatar', sa.String(length=2048), nullable=True),
    sa.Column('locale', sa.String(length=32), nullable=True),
    sa.Column('timezone', sa.String(length=64), nullable=True),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('channels', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('is_online', sa.Boolean(), nullable=True),
    sa.Column('last_online_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('deleted', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_subscribers'))
    )
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.create_index('uq_subscribers_environment_subscriber', ['environment_id', 'subscriber_id'], unique=True)

    op.create_table('tenants',
    sa.Column('identifier', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tenants'))
    )
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.create_index('uq_tenants_environment_identifier', ['environment_id', 'identifier'], unique=True)

    op.create_table('topic_subscribers',
    sa.Column('topic_id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('subscriber_id', sa.String(length=24), nullable=False),
    sa.Column('external_subscriber_id', sa.String(length=255), nullable=False),
    sa.Column('topic_key', sa.String(length=255), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topic_subscribers'))
    )
    with op.batch_alter_table('topic_subscribers', schema=None) as batch_op:
        batch_op.create_index('ix_topic_subscribers_subscriber', ['subscriber_id'], unique=False)
        batch_op.create_index('uq_topic_subscribers_topic_subscriber', ['topic_id', 'subscriber_id'], unique=True)

    op.create_table('topics',
    sa.Column('key', sa.String(length=255), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_topics'))
    )
    with op.batch_alter_table('topics', schema=None) as batch_op:
        batch_op.create_index('uq_topics_environment_key', ['environment_id', 'key'], unique=True)

    op.create_table('workflows',
    sa.Column('notification_group_id', sa.String(length=24), nullable=False),
    sa.Column('creator_id', sa.String(length=100), nullable=False),
    sa.Column('name', sa.String(length=300), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('trigger_identifier', sa.String(length=300), nullable=False),
    sa.Column('active', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('draft', sa.Boolean(), nullable=False),
    sa.Column('critical', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('tags', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('preference_settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=True),
    sa.Column('steps', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('variables', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('subscriber_variables', sa.JSON().with_variant(postgresql.JSONB(astext_type=Text()), 'postgresql'), nullable=False),
    sa.Column('deleted', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('deleted_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('deleted_by', sa.String(length=100), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('updated_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_workflows'))
    )
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.create_index('uq_workflows_environment_trigger', ['environment_id', 'trigger_identifier'], unique=True, sqlite_where=sa.text('deleted = 0'), postgresql_where=sa.text('deleted = false'))

    op.create_table('environments',
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('identifier', sa.String(length=64), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.ForeignKeyConstraint(['organization_id'], ['organizations.id'], name=op.f('fk_environments_organization_id_organizations'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_environments')),
    sa.UniqueConstraint('identifier', name=op.f('uq_environments_identifier'))
    )
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.create_index('uq_environments_organization_name', ['organization_id', 'name'], unique=True)

    op.create_table('api_keys',
    sa.Column('environment_id', sa.String(length=24), nullable=False),
    sa.Column('organization_id', sa.String(length=24), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', herald.models.base.UTCDateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', herald.models.base.UTCDateTime(timezone=True), nullable=True),
    sa.Column('id', sa.String(length=24), nullable=False),
    sa.ForeignKeyConstraint(['environment_id'], ['environments.id'], name=op.f('fk_api_keys_environment_id_environments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_keys')),
    sa.UniqueConstraint('key_hash', name=op.f('uq_api_keys_key_hash'))
    )


def downgrade() -> None:
    op.drop_table('api_keys')
    with op.batch_alter_table('environments', schema=None) as batch_op:
        batch_op.drop_index('uq_environments_organization_name')

    op.drop_table('environments')
    with op.batch_alter_table('workflows', schema=None) as batch_op:
        batch_op.drop_index('uq_workflows_environment_trigger', sqlite_where=sa.text('deleted = 0'), postgresql_where=sa.text('deleted = false'))

    op.drop_table('workflows')
    with op.batch_alter_table('topics', schema=None) as batch_op:
        batch_op.drop_index('uq_topics_environment_key')

    op.drop_table('topics')
    with op.batch_alter_table('topic_subscribers', schema=None) as batch_op:
        batch_op.drop_index('uq_topic_subscribers_topic_subscriber')
        batch_op.drop_index('ix_topic_subscribers_subscriber')

    op.drop_table('topic_subscribers')
    with op.batch_alter_table('tenants', schema=None) as batch_op:
        batch_op.drop_index('uq_tenants_environment_identifier')

    op.drop_table('tenants')
    with op.batch_alter_table('subscribers', schema=None) as batch_op:
        batch_op.drop_index('uq_subscribers_environment_subscriber')

    op.drop_table('subscribers')
    op.drop_table('organizations')
    with op.batch_alter_table('notifications', schema=None) as batch_op:
        batch_op.drop_index('uq_notifications_event_subscriber')
        batch_op.drop_index('ix_notifications_environment_transaction')
        batch_op.drop_index('ix_notifications_environment_created')

    op.drop_table('notifications')
    with op.batch_alter_table('notification_groups', schema=None) as batch_op:
        batch_op.drop_index('ix_notification_groups_environment')

    op.drop_table('notification_groups')
    with op.batch_alter_table('messages', schema=None) as batch_op:
        batch_op.drop_index('uq_messages_job_delivery')
        batch_op.drop_index('ix_messages_subscriber_channel_created')
        batch_op.drop_index('ix_messages_environment_transaction')

    op.drop_table('messages')
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('uq_jobs_open_digest', sqlite_where=sa.text("status = 'delayed' AND step_type = 'digest'"), postgresql_where=sa.text("status = 'delayed' AND step_type = 'digest'"))
        batch_op.drop_index('ix_jobs_status_run_at')
        batch_op.drop_index('ix_jobs_notification')
        batch_op.drop_index('ix_jobs_merged_into')
        batch_op.drop_index('ix_jobs_environment_transaction')

    op.drop_table('jobs')
    with op.batch_alter_table('integrations', schema=None) as batch_op:
        batch_op.drop_index('uq_integrations_environment_identifier', sqlite_where=sa.text('deleted = 0'), postgresql_where=sa.text('deleted = false'))
        batch_op.drop_index('ix_integrations_organization_active')
        batch_op.drop_index('ix_integrations_environment_channel')

    op.drop_table('integrations')
    with op.batch_alter_table('idempotency_records', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_idempotency_records_expires_at'))

    op.drop_table('idempotency_records')
    with op.batch_alter_table('execution_details', schema=None) as batch_op:
        batch_op.drop_index('ix_execution_details_notification')
        batch_op.drop_index('ix_execution_details_job')

    op.drop_table('execution_details')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('uq_events_environment_transaction')

    op.drop_table('events')
