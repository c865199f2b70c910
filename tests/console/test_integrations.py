"""The Integrations page: failover order and breaker, forms from each provider's credentials, secrets write-only, send test."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.kit.time import utcnow
from herald.models import AuditEntry, Integration, IntegrationHealth
from herald.providers.registry import PROVIDERS
from tests.conftest import Tenancy
from tests.fixtures import peers
from tests.fixtures.console import ConsoleAs
from tests.fixtures.peers import HttpPeer, SmtpPeer

SENDGRID_KEY = "SG.sendgrid-secret-value-0123456789abcdef"
SMTP_PASSWORD = "smtp-password-never-shown-42"
TWILIO_TOKEN = "twilio-auth-token-never-shown-7"


@pytest.fixture
def sms_peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    try:
        yield server
    finally:
        server.stop()


async def _create(api: httpx.AsyncClient, **body: object) -> dict:
    answer = await api.post("/v1/integrations", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["data"]


async def _stored(app: FastAPI, integration_id: str) -> Integration:
    async with app.state.sessionmaker() as session:
        return (await session.execute(select(Integration).where(Integration.id == integration_id))).scalar_one()


async def _audit(app: FastAPI, resource_id: str) -> list[AuditEntry]:
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(AuditEntry).where(AuditEntry.resource_id == resource_id).order_by(AuditEntry.created_at)
        )
        return list(rows.scalars())


def _rows(page: str, channel: str) -> list[str]:
    """The names of a channel's table, in the order shown."""
    section = page.split(f'id="channel-{channel}"', 1)[1].split("<h2", 1)[0]
    return [html.unescape(name) for name in re.findall(r'<th scope="row"><a href="/console/integrations/[^"]+">([^<]+)</a>', section)]


async def test_each_channel_lists_its_integrations_in_failover_order_with_the_breaker(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    first = await _create(api, providerId="sendgrid", channel="email", name="First", active=True, credentials={"apiKey": SENDGRID_KEY})
    backup = await _create(api, providerId="postmark", channel="email", name="Backup", active=True, credentials={"apiKey": "pm-key"}, priority=5)
    await _create(api, providerId="resend", channel="email", name="Draft", active=False)
    assert first["primary"] is True and backup["primary"] is False
    async with app.state.sessionmaker() as session:
        now = utcnow()
        session.add(
            IntegrationHealth(
                integration_id=backup["_id"],
                environment_id=backup["_environmentId"],
                failures=5,
                consecutive_failures=5,
                failing_since=now - timedelta(minutes=2),
                skipped_until=now + timedelta(minutes=10),
                last_error="postmark: the server answered 503",
            )
        )
        await session.commit()
    viewer = await console_as("viewer")
    page = await viewer.get("/console/integrations")
    assert page.status_code == 200
    assert _rows(page.text, "email") == ["First", "Backup", "Draft"]
    email = page.text.split('id="channel-email"', 1)[1].split("<h2", 1)[0]
    first_row, backup_row, draft_row = email.split("<tr>")[2:5]
    assert "Primary" in first_row and "Healthy" in first_row
    assert "Skipped until" in backup_row and "5 failures" in backup_row and "the server answered 503" in backup_row
    assert "Inactive" in draft_row
    # The in-app channel has the environment's inbox; a viewer is offered no change.
    assert "Novu Inbox" in page.text
    assert "Make primary" not in page.text and "/console/integrations/new" not in page.text
    admin = await console_as("admin")
    made = await admin.post_form(f"/console/integrations/{backup['_id']}/primary")
    assert made.status_code == 303
    assert _rows((await admin.get("/console/integrations")).text, "email") == ["Backup", "First", "Draft"]
    assert [entry.action for entry in await _audit(app, backup["_id"])][-1] == "integration.primary_set"


async def test_the_form_of_a_provider_asks_for_its_declared_credentials_by_their_api_names(console_as: ConsoleAs) -> None:
    admin = await console_as("admin")
    for provider_id, cls in PROVIDERS.items():
        page = await admin.get(f"/console/integrations/new?provider={provider_id}")
        assert page.status_code == 200, provider_id
        names = re.findall(r'<input [^>]*name="([^"]+)"', page.text.split('class="integration-form"', 1)[1].split("</form>", 1)[0])
        assert [name for name in names if name.startswith("credentials.")] == [
            f"credentials.{name}" for name in cls.declared_credentials()
        ], provider_id
        assert "name" in names and "active" in names
    smtp_form = (await admin.get("/console/integrations/new?provider=nodemailer")).text
    assert re.search(r'id="credentials.password" name="credentials.password" type="password"', smtp_form)
    assert re.search(r'id="credentials.host" name="credentials.host" type="text"', smtp_form)
    assert 'type="checkbox" id="credentials.secure"' in smtp_form
    unknown = await admin.get("/console/integrations/new?provider=carrier-pigeon")
    assert unknown.status_code == 404


async def test_secrets_never_reach_the_browser_and_an_empty_secret_keeps_the_stored_one(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, smtp: SmtpPeer
) -> None:
    admin = await console_as("admin")
    answers: list[httpx.Response] = []
    added = await admin.post_form(
        "/console/integrations/new",
        {
            "providerId": "nodemailer",
            "name": "Office SMTP",
            "active": "true",
            "credentials.host": "127.0.0.1",
            "credentials.port": str(smtp.port),
            "credentials.from": "herald@example.com",
            "credentials.user": "mailer",
            "credentials.password": SMTP_PASSWORD,
            "credentials.ignoreTls": "true",
        },
    )
    answers.append(added)
    assert added.status_code == 303, added.text
    integration_id = added.headers["location"].rsplit("/", 1)[1]
    stored = await _stored(app, integration_id)
    box = app.state.secret_box
    assert stored.provider_id == "nodemailer" and stored.active and stored.credentials["host"] == "127.0.0.1"
    assert box.open(stored.credentials["password"]) == SMTP_PASSWORD and stored.credentials["ignoreTls"] is True
    await _create(api, providerId="sendgrid", channel="email", name="SendGrid", active=True, credentials={"apiKey": SENDGRID_KEY})

    page = await admin.get(f"/console/integrations/{integration_id}")
    answers.append(page)
    assert 'value="127.0.0.1"' in page.text and 'value="mailer"' in page.text
    assert "set. Leave empty to keep it" in page.text
    # Saved with the password left empty: the stored one stays; the rest is as typed.
    saved = await admin.post_form(
        f"/console/integrations/{integration_id}",
        {
            "name": "Office SMTP (renamed)",
            "active": "true",
            "credentials.host": "127.0.0.1",
            "credentials.port": str(smtp.port),
            "credentials.from": "ops@example.com",
            "credentials.user": "mailer",
            "credentials.password": "",
            "credentials.ignoreTls": "true",
        },
    )
    answers.append(saved)
    assert saved.status_code == 303
    stored = await _stored(app, integration_id)
    assert stored.name == "Office SMTP (renamed)" and stored.credentials["from"] == "ops@example.com"
    assert box.open(stored.credentials["password"]) == SMTP_PASSWORD
    # A refused form (active without a host) shows the field's error, and still no secret.
    refused = await admin.post_form(
        f"/console/integrations/{integration_id}",
        {"name": "Office SMTP", "active": "true", "credentials.host": "", "credentials.password": "typed-but-refused-secret"},
    )
    answers.append(refused)
    assert refused.status_code == 422
    assert "cannot send without credentials.host" in html.unescape(refused.text)
    assert "typed-but-refused-secret" not in refused.text
    assert (await _stored(app, integration_id)).name == "Office SMTP (renamed)"
    # A new secret replaces the stored one.
    replaced = await admin.post_form(
        f"/console/integrations/{integration_id}",
        {"name": "Office SMTP", "active": "true", "credentials.host": "127.0.0.1", "credentials.password": "a-new-password-123"},
    )
    answers.append(replaced)
    assert box.open((await _stored(app, integration_id)).credentials["password"]) == "a-new-password-123"
    answers.append(await admin.post_form(f"/console/integrations/{integration_id}/test", {"to": "someone@example.com"}))

    # Every page and answer of the Integrations pages, for every role that can see them.
    for role in ("viewer", "author", "admin", "owner"):
        member = await console_as(role)
        answers.append(await member.get("/console/integrations"))
        answers.append(await member.get(f"/console/integrations/{integration_id}"))
        for integration in (await api.get("/v1/integrations")).json()["data"]:
            answers.append(await member.get(f"/console/integrations/{integration['_id']}"))
    for provider_id in PROVIDERS:
        answers.append(await admin.get(f"/console/integrations/new?provider={provider_id}"))
    # The API's answers mask them too (herald.kit.crypto).
    answers += [await api.get("/v1/integrations"), await api.get("/v1/integrations/active")]
    for answer in answers:
        for secret in (SMTP_PASSWORD, "a-new-password-123", SENDGRID_KEY, "typed-but-refused-secret"):
            assert secret not in answer.text, (answer.request.url, secret)
            assert secret not in str(answer.headers), (answer.request.url, secret)
    # The audit log has the changes, secrets masked.
    entries = await _audit(app, integration_id)
    assert [entry.action for entry in entries] == [
        "integration.created",
        "integration.updated",
        "integration.updated",
        "integration.test_sent",
    ]
    assert all(SMTP_PASSWORD not in str(entry.changes) and "a-new-password-123" not in str(entry.changes) for entry in entries)
    assert entries[0].actor_email == admin.member.email  # type: ignore[union-attr]


async def test_only_admins_and_owners_change_integrations(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    made = await _create(api, providerId="postmark", channel="email", name="Postmark", active=True, credentials={"apiKey": "pm-key"})
    for role in ("viewer", "author"):
        member = await console_as(role)
        page = await member.get(f"/console/integrations/{made['_id']}")
        assert page.status_code == 200 and "<fieldset disabled>" in page.text and ">Save<" not in page.text
        assert (await member.get("/console/integrations/new?provider=postmark")).status_code == 403
        refused = [
            await member.post_form("/console/integrations/new", {"providerId": "postmark", "name": "Mine"}),
            await member.post_form(f"/console/integrations/{made['_id']}", {"name": "Renamed", "active": "true"}),
            await member.post_form(f"/console/integrations/{made['_id']}/primary"),
            await member.post_form(f"/console/integrations/{made['_id']}/test", {"to": "a@example.com"}),
        ]
        assert [answer.status_code for answer in refused] == [403] * 4
        assert f"Your role ({role}) does not allow integrations.write" in refused[0].text
    assert (await _stored(app, made["_id"])).name == "Postmark"
    owner = await console_as("owner")
    # Without the CSRF token, even an owner is refused.
    assert (await owner.post_form(f"/console/integrations/{made['_id']}", {"name": "X", "active": "true"}, csrf="")).status_code == 403
    created = await owner.post_form("/console/integrations/new", {"providerId": "postmark", "name": "Draft postmark"})
    assert created.status_code == 303
    assert (await _stored(app, created.headers["location"].rsplit("/", 1)[1])).active is False
    # Another environment's integration is not found from this one.
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://herald.test", headers={"Authorization": f"ApiKey {tenancy.production_api_key}"}
    ) as production:
        theirs = await _create(production, providerId="postmark", channel="email", name="Prod", active=True, credentials={"apiKey": "k"})
    assert (await owner.get(f"/console/integrations/{theirs['_id']}")).status_code == 404


async def test_send_test_emails_through_the_integration(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, smtp: SmtpPeer
) -> None:
    made = await _create(
        api,
        providerId="nodemailer",
        channel="email",
        name="SMTP",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
    )
    admin = await console_as("admin")
    page = await admin.get(f"/console/integrations/{made['_id']}")
    assert "Send test" in page.text and 'name="to"' in page.text
    wrong = await admin.post_form(f"/console/integrations/{made['_id']}/test", {"to": "not an address"})
    assert wrong.status_code == 422 and "Enter an email address" in wrong.text
    assert smtp.received == []
    sent = await admin.post_form(f"/console/integrations/{made['_id']}/test", {"to": "ops@example.com"})
    assert sent.status_code == 200 and "Test sent to ops@example.com" in sent.text
    [mail] = smtp.received
    assert mail.rcpt_tos == ["ops@example.com"] and "Test email from Herald" in mail.data.decode()
    # A refusal is said in the provider's words.
    smtp.refuse.add("bounce@example.com")
    refused = await admin.post_form(f"/console/integrations/{made['_id']}/test", {"to": "bounce@example.com"})
    assert refused.status_code == 200 and "The test was not sent" in refused.text
    changes = [entry.changes for entry in await _audit(app, made["_id"]) if entry.action == "integration.test_sent"]
    assert [change["sent"] for change in changes] == [True, False]


async def test_send_test_texts_through_an_sms_integration_within_the_outbound_policy(
    api: httpx.AsyncClient, console_as: ConsoleAs, sms_peer: HttpPeer
) -> None:
    peers.install_twilio(sms_peer, account_sid="AC123", token=TWILIO_TOKEN)
    made = await _create(
        api,
        providerId="twilio",
        channel="sms",
        name="Twilio",
        active=True,
        credentials={"accountSid": "AC123", "token": TWILIO_TOKEN, "from": "+15550001111", "baseUrl": sms_peer.url},
    )
    admin = await console_as("admin")
    sent = await admin.post_form(f"/console/integrations/{made['_id']}/test", {"to": "+447700900123"})
    assert sent.status_code == 200 and "Test sent to +447700900123" in sent.text
    [request] = sms_peer.requests_to("/2010-04-01/Accounts/AC123/Messages.json")
    assert request.form_value("To") == "+447700900123" and "test message from Herald" in request.form_value("Body")
    # An address the outbound policy does not allow is not reached.
    blocked = await _create(
        api,
        providerId="twilio",
        channel="sms",
        name="Twilio elsewhere",
        active=True,
        credentials={"accountSid": "AC123", "token": TWILIO_TOKEN, "from": "+15550001111", "baseUrl": "http://10.255.255.1:9"},
    )
    refused = await admin.post_form(f"/console/integrations/{blocked['_id']}/test", {"to": "+447700900123"})
    assert refused.status_code == 200 and "outbound policy refused" in refused.text
    assert len(sms_peer.requests_to("/2010-04-01/")) == 1
    assert TWILIO_TOKEN not in sent.text + refused.text
