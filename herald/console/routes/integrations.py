"""The Integrations page: each channel's providers in failover order, their breaker, add and edit, send a test.

The forms are built from what each provider declares it reads
(``Provider.declared_credentials``), their fields named as the API names them
(``name``, ``credentials.host``), so what a member fills in is what a
``PUT /v1/integrations/{id}`` would send. Secrets are write-only: a secret
field is never filled in, the page says whether it is set, and an empty one
keeps the stored secret (sent to the service as its mask, which
:meth:`herald.kit.crypto.SecretBox.seal_credentials` reads as "keep").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.datastructures import FormData
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.engine import breaker
from herald.integrations import sending, service
from herald.integrations.schemas import CHANNELS, CreateIntegrationRequest, Credentials, UpdateIntegrationRequest
from herald.kit.crypto import SECRET_CREDENTIAL_FIELDS, SecretBox, is_secret
from herald.kit.errors import HeraldError, NotFoundError, ValidationFailed
from herald.kit.outbound import OutboundPolicy
from herald.models import Integration
from herald.providers.registry import PROVIDERS, provider_class

router = APIRouter()

CHANNEL_NAMES = {"in_app": "In-app", "email": "Email", "sms": "SMS", "chat": "Chat", "push": "Push"}
# What a credential is, in plain words (the field's name is the API's, shown beside it).
CREDENTIAL_LABELS = {
    "apiKey": "API key",
    "secretKey": "Secret key",
    "accessKey": "Access key",
    "accountSid": "Account SID",
    "token": "Token",
    "apiToken": "API token",
    "host": "Host",
    "port": "Port",
    "user": "User",
    "password": "Password",
    "from": "From",
    "senderName": "Sender name",
    "domain": "Domain",
    "region": "Region",
    "baseUrl": "Base URL",
    "webhookUrl": "Webhook URL",
    "channelId": "Channel id",
    "ipPoolName": "IP pool name",
    "messageProfileId": "Messaging profile id",
    "serviceAccount": "Service account (JSON)",
    "projectName": "Project name",
    "applicationId": "Application id",
    "apiVersion": "API version",
    "secure": "Use TLS from the start (secure)",
    "requireTls": "Require STARTTLS",
    "ignoreTls": "Do not use STARTTLS",
}
_BOOLEAN_CREDENTIALS = frozenset(
    name for name, info in Credentials.model_fields.items() if info.annotation is bool
) | frozenset({"secure", "requireTls", "ignoreTls"})
MAX_CREDENTIAL_LENGTH = 20_000


@dataclass(frozen=True)
class CredentialField:
    """One input of a provider's form."""

    name: str  # the API's name, ``credentials.<name>`` in the form
    label: str
    required: bool
    secret: bool
    boolean: bool
    # What the page shows: a non-secret's value; for a secret, whether one is set (never its value).
    value: Any = None
    is_set: bool = False

    @property
    def form_name(self) -> str:
        return f"credentials.{self.name}"


def credential_fields(provider_id: str, stored: dict[str, Any] | None = None, given: dict[str, Any] | None = None) -> list[CredentialField]:
    """The provider's declared credentials as form fields, filled from ``given`` (a refused form) or ``stored``."""
    cls = provider_class(provider_id)
    if cls is None:
        return []
    stored = stored or {}
    fields = []
    for name in cls.declared_credentials():
        secret = name in SECRET_CREDENTIAL_FIELDS
        shown = (given or {}).get(name, stored.get(name)) if not secret else None
        fields.append(
            CredentialField(
                name=name,
                label=CREDENTIAL_LABELS.get(name, name),
                required=name in cls.required_credentials,
                secret=secret,
                boolean=name in _BOOLEAN_CREDENTIALS,
                value=shown,
                is_set=secret and bool(stored.get(name)),
            )
        )
    return fields


def credentials_from_form(
    console: Console, form: FormData, provider_id: str, box: SecretBox, stored: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The credentials to send to the service: the form's, with every empty secret kept as stored.

    Credentials stored that the form does not show (``tlsOptions`` set
    through the API) are kept as they are.
    """
    stored = stored or {}
    # A stored secret is sent back as its mask: the service keeps it (SecretBox.seal_credentials).
    credentials: dict[str, Any] = {
        key: box.mask(value) if is_secret(key, value) else value for key, value in stored.items()
    }
    for field in credential_fields(provider_id):
        if field.boolean:
            if form.get(field.form_name):
                credentials[field.name] = True
            else:
                credentials.pop(field.name, None)
            continue
        value = console.field(form, field.form_name, MAX_CREDENTIAL_LENGTH)
        if field.secret:
            if value:
                credentials[field.name] = value
        elif value:
            credentials[field.name] = value
        else:
            credentials.pop(field.name, None)
    return credentials


def _breaker_text(health: dict[str, Any]) -> str:
    state = health.get("status", "healthy")
    if state == breaker.Status.SKIPPED:
        return f"Skipped until {health.get('skippedUntil', '')} after {health.get('consecutiveFailures', 0)} failures"
    if state == breaker.Status.FAILING:
        return f"Failing since {health.get('failingSince', '')} ({health.get('consecutiveFailures', 0)} failures)"
    if state == breaker.Status.HALF_OPEN:
        return "Trying again with one message"
    return "Healthy"


def _provider_name(provider_id: str) -> str:
    cls = provider_class(provider_id)
    if cls is not None:
        return cls.display_name
    return "Herald inbox" if provider_id == service.IN_APP_PROVIDER_ID else provider_id


def _outbound(console: Console) -> OutboundPolicy:
    return OutboundPolicy.allowing(console.settings.outbound_allow)


def _box(console: Console) -> SecretBox:
    return console.request.app.state.secret_box


def _audit_changes(integration: Integration, box: SecretBox) -> dict[str, Any]:
    return {
        "name": integration.name,
        "providerId": integration.provider_id,
        "channel": integration.channel,
        "active": integration.active,
        "priority": integration.priority,
        # Secrets masked whole (herald.audit masks them again).
        "credentials": box.mask_credentials(integration.credentials, reveal_edges=False),
    }


@router.get("/integrations")
async def integrations_page(console: ConsoleDep) -> Response:
    console.authorize("integrations.read")
    rows = await service.environment_integrations(console.db, console.principal)
    shown = await service.present(console.db, rows, _box(console), console.principal)
    by_channel: dict[str, list[dict[str, Any]]] = {channel: [] for channel in CHANNELS}
    for integration in shown:
        health = integration.health.model_dump(exclude_none=True) if integration.health else {"status": "healthy"}
        by_channel[integration.channel].append(
            {
                "id": integration.id,
                "name": integration.name,
                "provider": _provider_name(integration.providerId),
                "primary": integration.primary,
                "active": integration.active,
                "priority": integration.priority,
                "breaker": _breaker_text(health),
                "breaker_status": health.get("status", "healthy"),
                "last_error": health.get("lastError"),
            }
        )
    for items in by_channel.values():
        # Failover order: the primary, then the active by priority, then the inactive.
        items.sort(key=lambda item: (not item["active"], not item["primary"], -item["priority"], item["name"]))
    providers = {
        channel: sorted(
            ((cls.provider_id, cls.display_name) for cls in PROVIDERS.values() if cls.channel == channel),
            key=lambda pair: pair[1].lower(),
        )
        for channel in CHANNELS
        if channel != "in_app"
    }
    return console.render(
        "integrations.html",
        title="Integrations",
        channels=[(channel, CHANNEL_NAMES[channel], by_channel[channel]) for channel in CHANNELS],
        providers=providers,
        channel_names=CHANNEL_NAMES,
    )


def _form_page(
    console: Console,
    *,
    provider_id: str,
    integration: Integration | None = None,
    given: dict[str, Any] | None = None,
    values: dict[str, Any] | None = None,
    status_code: int = 200,
    test_result: str | None = None,
    test_to: str = "",
) -> Response:
    cls = provider_class(provider_id)
    assert cls is not None or integration is not None
    channel = cls.channel if cls is not None else integration.channel  # type: ignore[union-attr]
    defaults = {
        "name": integration.name if integration else (cls.display_name if cls else provider_id),
        "active": integration.active if integration else True,
        "priority": "" if integration is None else str(integration.priority),
    }
    return console.render(
        "integration.html",
        title=f"{integration.name} integration" if integration else f"New {_provider_name(provider_id)} integration",
        status_code=status_code,
        integration=integration,
        provider_id=provider_id,
        provider_name=_provider_name(provider_id),
        channel=channel,
        channel_name=CHANNEL_NAMES.get(channel, channel),
        fields=credential_fields(provider_id, integration.credentials if integration else None, given),
        values={**defaults, **(values or {})},
        testable=integration is not None and channel in sending.TESTABLE_CHANNELS and integration.active,
        test_result=test_result,
        test_to=test_to,
    )


def _known_provider(provider_id: str) -> str:
    cls = provider_class(provider_id)
    if cls is None:
        raise NotFoundError(f"Herald has no provider {provider_id[:100]}")
    return cls.provider_id


def _form_values(console: Console, form: FormData) -> dict[str, Any]:
    return {
        "name": console.field(form, "name", 200),
        "active": bool(form.get("active")),
        "priority": console.field(form, "priority", 10),
    }


def _priority(console: Console, text: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) > 1_000_000:
        console.fail("priority", "Enter the failover priority as a whole number from 0 to 1000000")
        return None
    return int(text)


@router.get("/integrations/new")
async def new_integration(console: ConsoleDep, provider: str = "") -> Response:
    console.authorize("integrations.write")
    return _form_page(console, provider_id=_known_provider(provider[:100]))


@router.post("/integrations/new")
async def create_integration(console: ConsoleDep) -> Response:
    console.authorize("integrations.write")
    form = await console.form()
    provider_id = _known_provider(console.field(form, "providerId", 100))
    box = _box(console)
    values = _form_values(console, form)
    credentials = credentials_from_form(console, form, provider_id, box)
    priority = _priority(console, values["priority"])
    if not console.errors:
        try:
            request = CreateIntegrationRequest(
                providerId=provider_id,
                channel=PROVIDERS[provider_id].channel,  # type: ignore[arg-type]
                name=values["name"] or None,
                credentials=Credentials.model_validate(credentials),
                active=values["active"],
                priority=priority,
            )
            integration = await service.create_integration(console.db, console.principal, box, request)
        except (ValidationError, HeraldError) as exc:
            console.form_refusal(exc, "name")
        else:
            console.record("integration.created", "integration", integration.id, changes=_audit_changes(integration, box))
            return console.redirect(f"/console/integrations/{integration.id}", flash=f"Integration {integration.name} added")
    return _form_page(console, provider_id=provider_id, given=credentials, values=values, status_code=422)


@router.get("/integrations/{integration_id}")
async def integration_page(integration_id: str, console: ConsoleDep) -> Response:
    console.authorize("integrations.read")
    integration = await service.get_integration(console.db, console.principal, integration_id[:100])
    return _form_page(console, provider_id=integration.provider_id, integration=integration)


@router.post("/integrations/{integration_id}")
async def update_integration(integration_id: str, console: ConsoleDep) -> Response:
    console.authorize("integrations.write")
    integration = await service.get_integration(console.db, console.principal, integration_id[:100])
    form = await console.form()
    box = _box(console)
    values = _form_values(console, form)
    credentials = credentials_from_form(console, form, integration.provider_id, box, integration.credentials)
    priority = _priority(console, values["priority"])
    if not values["name"]:
        console.fail("name", "Enter a name")
    if not console.errors:
        try:
            fields: dict[str, Any] = {"name": values["name"], "active": values["active"], "credentials": credentials}
            if priority is not None and priority != integration.priority:
                fields["priority"] = priority
            request = UpdateIntegrationRequest.model_validate(fields)
            updated = await service.update_integration(console.db, console.principal, box, integration.id, request)
        except (ValidationError, HeraldError) as exc:
            console.form_refusal(exc, "name")
        else:
            console.record("integration.updated", "integration", updated.id, changes=_audit_changes(updated, box))
            return console.redirect(f"/console/integrations/{updated.id}", flash=f"Integration {updated.name} saved")
    # The service checks before it changes anything: the integration is as stored; the page shows what was typed (secrets aside).
    given = {key: value for key, value in credentials.items() if not is_secret(key, value)}
    return _form_page(console, provider_id=integration.provider_id, integration=integration, given=given, values=values, status_code=422)


@router.post("/integrations/{integration_id}/primary")
async def make_primary(integration_id: str, console: ConsoleDep) -> Response:
    console.authorize("integrations.write")
    integration = await service.set_primary(console.db, console.principal, integration_id[:100])
    console.record("integration.primary_set", "integration", integration.id, changes={"primary": True, "channel": integration.channel})
    return console.redirect("/console/integrations", flash=f"{integration.name} is the primary {CHANNEL_NAMES[integration.channel]} integration")


@router.post("/integrations/{integration_id}/test")
async def send_test(integration_id: str, console: ConsoleDep) -> Response:
    """Send a test message through the integration, to the address or number the member typed."""
    console.authorize("integrations.write")
    integration = await service.get_integration(console.db, console.principal, integration_id[:100])
    form = await console.form()
    to = console.field(form, "to", sending.MAX_RECIPIENT_LENGTH)
    try:
        not_sent = await sending.send_test(
            console.db, console.principal, _box(console), _outbound(console), integration.id, to
        )
    except ValidationFailed as exc:
        console.errors_from(exc, "to")
        return _form_page(console, provider_id=integration.provider_id, integration=integration, status_code=422, test_to=to)
    console.record(
        "integration.test_sent", "integration", integration.id, changes={"to": to, "sent": not_sent is None, "error": not_sent}
    )
    result = f"Test sent to {to}" if not_sent is None else f"The test was not sent: {not_sent}"
    return _form_page(console, provider_id=integration.provider_id, integration=integration, test_result=result, test_to=to)
