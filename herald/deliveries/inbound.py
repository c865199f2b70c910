"""Providers' own delivery webhooks: ``POST /webhooks/organizations/{org}/environments/{env}/{channel}/{integrationId}``.

The provider calls this route itself, with no API key: the integration named in
the path must be a live one of that organization, environment and channel (else
404, as for any id that is not the caller's), and must take inbound events
(``configurations.inboundWebhookEnabled``, as in Novu). The provider's reader,
beside its sender, checks the provider's signature and reads its events; they
are recorded by :func:`herald.deliveries.service.record_delivery_events`
against the messages of that environment whose provider id they name. Events
about mail Herald did not send are left out, so the provider is not asked to
retry them. A signature's single-use token (Mailgun's) is spent in the same
transaction as the events are recorded, so a request that fails leaves it
unspent for the provider's retry.

The same readers serve novu-py's ``activity.track``
(``POST /v2/inbound-webhooks/delivery-providers/{environmentId}/{integrationId}``,
:func:`track`): with an API key, a body in the provider's own format is read
and its signature checked by the provider's reader exactly as above; a body in
Herald's generic form (herald/deliveries/parsers.py) is read as that form.
"""

from __future__ import annotations

import inspect
import json
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from herald.deliveries.parsers import GENERIC_KEYS, parser_for
from herald.deliveries.repository import DeliveryRepository
from herald.deliveries.schemas import DeliveryEvent, WebhookResult
from herald.deliveries.service import record_delivery_events
from herald.integrations.repository import IntegrationRepository
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, NotFoundError, ServiceUnavailableError, ValidationFailed
from herald.kit.outbound import OutboundPolicy, OutboundRefused
from herald.models import Integration
from herald.providers.answers import read_streamed
from herald.providers.email import mailgun_events, postmark_events, resend_events, sendgrid_events, ses_events
from herald.providers.http import create_http_client
from herald.providers.inbound import EventReader, InboundIntegration, InboundRequest
from herald.providers.sms import plivo_events, telnyx_events, twilio_events, vonage_events

CHANNELS = ("email", "sms")
# Longest answer taken when reaching back to a provider (a certificate, a confirmation).
MAX_FETCH_BYTES = 64 * 1024


class ProviderFetch:
    """GETs to a provider on behalf of its webhook (SNS's certificate and confirmation), through the outbound policy.

    One client per API process, made on first use: most installs never need it.
    """

    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy
        self.client: httpx.AsyncClient | None = None

    async def __call__(self, url: str) -> bytes:
        if self.client is None:
            self.client = create_http_client(outbound=self.policy, timeout=10.0)
        host = urlsplit(url).hostname
        try:
            # Read to MAX_ANSWER_BYTES at most, then closed (providers/answers.py); more than MAX_FETCH_BYTES is refused.
            response = await read_streamed(await self.client.send(self.client.build_request("GET", url), stream=True))
        except (httpx.HTTPError, OutboundRefused) as exc:
            raise ServiceUnavailableError(f"Herald could not reach {host}: {type(exc).__name__}") from None
        if not response.is_success:
            raise ServiceUnavailableError(f"{host} answered {response.status_code}")
        if len(response.content) > MAX_FETCH_BYTES:
            raise ServiceUnavailableError(f"{host} answered more than {MAX_FETCH_BYTES // 1024} KB")
        return response.content


# providerId -> the reader of that provider's webhooks (beside its sender).
READERS: dict[str, EventReader] = {
    "sendgrid": sendgrid_events.read_events,
    "twilio": twilio_events.read_events,
    "mailgun": mailgun_events.read_events,
    "postmark": postmark_events.read_events,
    "resend": resend_events.read_events,
    "ses": ses_events.read_events,
    "telnyx": telnyx_events.read_events,
    "plivo": plivo_events.read_events,
    # Vonage's providerId is Novu's old name for it; "vonage" is its alias.
    "nexmo": vonage_events.read_events,
    "vonage": vonage_events.read_events,
}


async def receive(
    session: AsyncSession,
    box: SecretBox,
    organization_id: str,
    environment_id: str,
    channel: str,
    integration_id: str,
    request: InboundRequest,
) -> list[WebhookResult]:
    repository = DeliveryRepository(session)
    integration = None
    if channel in CHANNELS:
        integration = await repository.integration_of(organization_id, environment_id, channel, integration_id)
    if integration is None:
        raise NotFoundError(f"Integration with id {integration_id} not found")
    if (integration.configurations or {}).get("inboundWebhookEnabled") is not True:
        raise BadRequestError(
            f"Integration {integration_id} does not take inbound webhooks: set its "
            "configurations.inboundWebhookEnabled to true (PUT /v1/integrations/{integrationId})"
        )
    reader = READERS.get(integration.provider_id)
    if reader is None:
        raise BadRequestError(
            f"Herald does not read {integration.provider_id}'s delivery webhooks; "
            f"readable: {', '.join(sorted(READERS))}"
        )
    events = await _read_with(reader, repository, box, integration, request)
    return await record_delivery_events(session, integration, events, skip_unknown=True)


async def _read_with(
    reader: EventReader,
    repository: DeliveryRepository,
    box: SecretBox,
    integration: Integration,
    request: InboundRequest,
) -> list[DeliveryEvent]:
    """The provider's reader on the request: its signature checked, its events read."""

    async def spend_token(token: str, expires_at: datetime) -> bool:
        return await repository.spend_signature_token(integration.environment_id, integration.id, token, expires_at)

    read = reader(
        request,
        InboundIntegration(
            provider_id=integration.provider_id,
            credentials=box.open_credentials(integration.credentials),
            configurations=box.open_configurations(integration.configurations),
            spend_token=spend_token,
        ),
    )
    return await read if inspect.isawaitable(read) else read


def _json_or_none(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None


def is_generic_form(body: Any) -> bool:
    """A JSON object every top-level key of which is the generic form's (``{"messageId", "status", ...}``).

    No provider's own format is one: SendGrid posts an array, Twilio and Plivo a
    form, Mailgun ``{"signature", "event-data"}``, Vonage's receipt names ``msisdn``
    and ``to`` beside ``messageId``, Amazon SNS capitalises its keys.
    """
    return isinstance(body, dict) and bool(body) and all(key in GENERIC_KEYS for key in body)


async def track(
    session: AsyncSession,
    box: SecretBox,
    principal: Principal,
    environment_id: str,
    integration_id: str,
    request: InboundRequest,
) -> list[WebhookResult]:
    """``POST /v2/inbound-webhooks/delivery-providers/{environmentId}/{integrationId}`` (``activity.track``).

    The environment in the path must be the caller's (another one's is not
    found, as its integrations are not). A body in the generic form is read as
    that form; any other body, for a provider Herald has a reader of, is the
    provider's own webhook: its signature rules apply as on
    ``/webhooks/organizations/...`` (the API key does not stand in for them),
    and events about mail Herald did not send are left out. The integration
    need not have ``inboundWebhookEnabled``: the API key is the caller's
    authority to report.
    """
    if environment_id != principal.environment_id:
        raise NotFoundError(f"Environment with id {environment_id} not found")
    integration = await IntegrationRepository(session).get(principal.environment_id, integration_id)
    if integration is None:
        raise NotFoundError(f"Integration with id {integration_id} not found")
    body = _json_or_none(request.body)
    reader = READERS.get(integration.provider_id)
    if reader is not None and not is_generic_form(body):
        events = await _read_with(reader, DeliveryRepository(session), box, integration, request)
        return await record_delivery_events(session, integration, events, skip_unknown=True)
    if not isinstance(body, dict):
        raise ValidationFailed.field("body", 'The body must be a JSON object: one event, or {"events": [...]}', None)
    return await record_delivery_events(session, integration, parser_for(integration.provider_id)(body))
