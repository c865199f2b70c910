"""The schema history: a database made by an earlier revision upgrades cleanly."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from herald.kit.db import create_engine
from herald.migrations import alembic_config, upgrade_async
from herald.models import Base, Integration
from herald.models.message import POSTGRESQL_MESSAGE_INDEXES
from herald.models.subscriber import POSTGRESQL_SEARCH_INDEXES
from tests.fixtures import stores


def head_revision() -> str:
    return str(ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head())


def _integration(id_: str, channel: str, priority: int, *, primary: bool = True, deleted: bool = False) -> dict[str, Any]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    return {
        "id": id_, "environment_id": "env", "organization_id": "org", "provider_id": "p", "channel": channel,
        "name": id_, "identifier": id_, "credentials": {}, "conditions": [], "active": True, "primary": primary,
        "priority": priority, "deleted": deleted, "created_at": at, "updated_at": at,
    }


async def _insert(engine: AsyncEngine, *rows: dict[str, Any]) -> None:
    async with engine.begin() as connection:
        for row in rows:
            await connection.execute(insert(Integration.__table__).values(**row))


async def test_a_0001_database_upgrades_and_keeps_one_primary_per_channel(empty_database: stores.TestDatabase) -> None:
    await upgrade_async(empty_database.url, "0001")
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        # Two email primaries, as a race could leave them before 0002.
        await _insert(
            engine, _integration("email-low", "email", 1), _integration("email-high", "email", 2), _integration("sms", "sms", 1)
        )
        await upgrade_async(empty_database.url)
        await upgrade_async(empty_database.url)  # a second run is harmless
        async with engine.connect() as connection:
            primaries = await connection.execute(
                select(Integration.id).where(Integration.primary.is_(True)).order_by(Integration.id)
            )
            assert list(primaries.scalars()) == ["email-high", "sms"]
            version = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
            assert version == head_revision()
        # From now on the store itself refuses a second primary in a channel...
        with pytest.raises(IntegrityError):
            await _insert(engine, _integration("email-again", "email", 3))
        # ...and counts neither deleted nor non-primary rows.
        await _insert(
            engine, _integration("email-plain", "email", 0, primary=False), _integration("gone", "email", 0, deleted=True)
        )
    finally:
        await engine.dispose()


def _declared_on_the_models(item: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """All but the PostgreSQL-only indexes of migrations 0031 and 0032, which the models leave out on purpose."""
    return not (type_ == "index" and name in POSTGRESQL_SEARCH_INDEXES | POSTGRESQL_MESSAGE_INDEXES)


async def test_the_migrations_build_the_schema_the_models_describe(empty_database: stores.TestDatabase) -> None:
    """Every table, column and index of herald.models, no more and no less, after ``herald migrate``."""
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        async with engine.connect() as connection:
            differences = await connection.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"include_object": _declared_on_the_models}), Base.metadata
                )
            )
            indexes = await connection.run_sync(
                lambda sync: {index["name"] for index in sync.dialect.get_indexes(sync, "jobs")}
            )
    finally:
        await engine.dispose()
    assert differences == []
    assert {"ix_jobs_due", "ix_jobs_leased"} <= indexes
    assert "ix_jobs_status_run_at" not in indexes


async def test_the_queue_tables_are_vacuumed_and_analyzed_often_on_postgresql(empty_database: stores.TestDatabase) -> None:
    if empty_database.kind != "postgres":
        pytest.skip("autovacuum settings are PostgreSQL's")
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        async with engine.connect() as connection:
            options = dict(
                (await connection.execute(text("SELECT relname, reloptions FROM pg_class WHERE relname IN ('jobs', 'messages')"))).all()
            )
    finally:
        await engine.dispose()
    assert "autovacuum_vacuum_scale_factor=0.01" in options["jobs"]
    assert "autovacuum_analyze_scale_factor=0.02" in options["messages"]


async def test_a_database_url_with_percent_encoding_migrates(empty_database: stores.TestDatabase, tmp_path: Path) -> None:
    """A password with ``@`` or ``/``, or a path with a space, is percent-encoded in the URL: ``herald migrate`` takes it as given.

    (Alembic's options are read with ConfigParser's interpolation, where ``%`` is special.)
    """
    if empty_database.kind == "postgres":
        # Trust authentication: the server asks for no password, so any one will do.
        url = make_url(empty_database.url).set(password="p@ss/word").render_as_string(hide_password=False)
        assert "%40" in url
    else:
        url = f"sqlite:///{tmp_path / 'with space'}/herald.db".replace(" ", "%20")
    await upgrade_async(url)
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as connection:
            revision = (await connection.execute(text("SELECT version_num FROM alembic_version"))).scalar_one()
    finally:
        await engine.dispose()
    assert revision == head_revision()
    if empty_database.kind == "sqlite":
        assert (tmp_path / "with space" / "herald.db").exists()


async def test_herald_migrate_seals_webhook_urls_stored_in_the_clear(empty_database: stores.TestDatabase) -> None:
    """webhookUrl became a secret after rows held it in the clear: the pass after the schema seals them, once."""
    from herald.kit.crypto import SecretBox
    from herald.migrations.sealing import seal_plaintext_secrets
    from herald.models import Subscriber

    box = SecretBox("migration-test-key")
    hook = "https://hooks.slack.com/services/T000/B000/plaintextSecret"
    await upgrade_async(empty_database.url)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    already = box.seal("SG.sealed-before")
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        await _insert(engine, {**_integration("chat", "chat", 1), "credentials": {"webhookUrl": hook, "apiKey": already, "channelId": "C1"}})
        subscriber = {"environment_id": "env", "organization_id": "org", "created_at": at, "updated_at": at, "version": 3}
        channel = {"providerId": "slack", "_integrationId": "chat", "credentials": {"webhookUrl": hook, "channel": "#ops"}}
        async with engine.begin() as connection:
            await connection.execute(
                insert(Subscriber.__table__),
                [
                    {**subscriber, "id": "s-hook", "subscriber_id": "with-hook", "channels": [channel]},
                    {**subscriber, "id": "s-tokens", "subscriber_id": "tokens", "channels": [{"providerId": "fcm", "credentials": {"deviceTokens": ["t"]}}]},
                    {**subscriber, "id": "s-none", "subscriber_id": "none", "channels": []},
                ],
            )

        first = await seal_plaintext_secrets(empty_database.url, box)
        again = await seal_plaintext_secrets(empty_database.url, box)

        assert (first.integrations, first.subscribers) == (1, 1)
        assert (again.integrations, again.subscribers) == (0, 0)
        async with engine.connect() as connection:
            credentials = (await connection.execute(select(Integration.credentials))).scalar_one()
            channels = dict((await connection.execute(select(Subscriber.id, Subscriber.channels))).all())
            versions = set((await connection.execute(select(Subscriber.version))).scalars())
        assert credentials["webhookUrl"].startswith("hsk1.") and box.open(credentials["webhookUrl"]) == hook
        assert (credentials["apiKey"], credentials["channelId"]) == (already, "C1")
        [entry] = channels["s-hook"]
        assert entry["credentials"]["webhookUrl"].startswith("hsk1.") and box.open(entry["credentials"]["webhookUrl"]) == hook
        assert entry["credentials"]["channel"] == "#ops" and entry["providerId"] == "slack"
        assert channels["s-tokens"] == [{"providerId": "fcm", "credentials": {"deviceTokens": ["t"]}}]
        assert versions == {3}
    finally:
        await engine.dispose()


async def test_herald_migrate_seals_webhook_signing_keys_stored_in_the_clear(empty_database: stores.TestDatabase) -> None:
    """configurations.inboundWebhookSigningKey became a secret after rows held it in the clear: the pass seals it, once."""
    from herald.kit.crypto import SecretBox
    from herald.migrations.sealing import seal_plaintext_secrets

    box = SecretBox("migration-test-key")
    await upgrade_async(empty_database.url)
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        await _insert(
            engine,
            {**_integration("mailgun", "email", 1), "configurations": {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": "key-in-the-clear"}},
            {**_integration("sealed", "sms", 1), "configurations": {"inboundWebhookSigningKey": box.seal("key-sealed-before")}},
            {**_integration("none", "push", 1), "configurations": None},
        )

        first = await seal_plaintext_secrets(empty_database.url, box)
        again = await seal_plaintext_secrets(empty_database.url, box)

        assert (first.integrations, again.integrations) == (1, 0)
        async with engine.connect() as connection:
            stored = dict((await connection.execute(select(Integration.id, Integration.configurations))).all())
        key = stored["mailgun"]["inboundWebhookSigningKey"]
        assert key.startswith("hsk1.") and box.open(key) == "key-in-the-clear"
        assert stored["mailgun"]["inboundWebhookEnabled"] is True
        assert box.open(stored["sealed"]["inboundWebhookSigningKey"]) == "key-sealed-before"
        assert stored["none"] is None
    finally:
        await engine.dispose()


async def test_0023_protects_production_and_gives_each_environment_its_idempotency_keys(
    empty_database: stores.TestDatabase,
) -> None:
    """Existing Productions become protected; a key claimed before 0023 stays claimed in every environment of its organization."""
    await upgrade_async(empty_database.url, "0022")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    environments = [
        ("dev", "org", "Development"), ("prod", "org", "Production"), ("staging", "org", "Staging"),
        ("other-dev", "other", "Development"),
    ]
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        async with engine.begin() as connection:
            for organization in ("org", "other"):
                await connection.execute(
                    text("INSERT INTO organizations (id, name, created_at) VALUES (:id, 'o', :at)"), {"id": organization, "at": at}
                )
            for id_, organization, name in environments:
                await connection.execute(
                    text(
                        "INSERT INTO environments (id, organization_id, name, identifier, created_at) "
                        "VALUES (:id, :organization, :name, :id, :at)"
                    ),
                    {"id": id_, "organization": organization, "name": name, "at": at},
                )
            await connection.execute(
                text(
                    "INSERT INTO idempotency_records (organization_id, key, body_hash, status, status_code, response_body, "
                    "created_at, expires_at) VALUES ('org', 'k', 'h', 'done', 201, 'sealed', :at, :at)"
                ),
                {"at": at},
            )
        await upgrade_async(empty_database.url)
        async with engine.connect() as connection:
            protected = dict((await connection.execute(text("SELECT id, protected FROM environments"))).all())
            records = (
                await connection.execute(
                    text("SELECT environment_id, key, status_code, response_body FROM idempotency_records ORDER BY environment_id")
                )
            ).all()
    finally:
        await engine.dispose()
    assert {id_: bool(flag) for id_, flag in protected.items()} == {
        "dev": False, "prod": True, "staging": False, "other-dev": False
    }
    assert [tuple(row) for row in records] == [
        ("dev", "k", 201, "sealed"), ("prod", "k", 201, "sealed"), ("staging", "k", 201, "sealed")
    ]
async def test_webhook_deliveries_queued_before_0025_keep_their_endpoint_and_their_queue(empty_database: stores.TestDatabase) -> None:
    """0025 gives the deliveries already waiting their endpoint (from their data): the webhook queue takes them, the steps' does not."""
    from sqlalchemy.orm import configure_mappers

    from herald.engine import queue
    from herald.kit.db import create_sessionmaker
    from herald.webhooks import queue as deliveries

    await upgrade_async(empty_database.url, "0024")
    engine = create_engine(empty_database.url, pool_size=1)
    try:
        async with engine.begin() as connection:
            for job_id, status in (("waiting", "queued"), ("sent", "completed")):
                await connection.execute(
                    text(
                        "INSERT INTO jobs (id, environment_id, organization_id, kind, status, event_id, transaction_id,"
                        " run_at, attempts, max_attempts, data, created_at, updated_at)"
                        " VALUES (:id, 'env', 'org', 'webhook', :status, :id, :id, :at, 0, 1000, :data, :at, :at)"
                    ).bindparams(at=datetime(2026, 1, 1, tzinfo=UTC)),
                    {"id": job_id, "status": status, "data": '{"endpointId": "ep1", "webhookId": "msg_1", "body": "{}"}'},
                )
        await upgrade_async(empty_database.url)
        async with engine.connect() as connection:
            endpoints = dict((await connection.execute(text("SELECT id, endpoint_id FROM jobs"))).all())
        assert endpoints == {"waiting": "ep1", "sent": None}
        sessions = create_sessionmaker(engine)
        configure_mappers()  # as a worker's sender does (the claim builds its jobs from their rows)
        async with sessions() as session, session.begin():
            assert await queue.claim_jobs(session, "steps", 10, 30) == []
            assert [job.id for job in await deliveries.claim_deliveries(session, "ep1", 10, "sender", 30)] == ["waiting"]
    finally:
        await engine.dispose()
