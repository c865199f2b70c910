"""Providers' own delivery webhooks: ``POST /webhooks/organizations/{org}/environments/{env}/{channel}/{integrationId}``.

The provider calls this route itself, with no API key: the integration named in
the path must be a live one of that organization, environment and channel (else
404, as for any id that is not the caller's), and must take inbound events
(``configurations.inboundWebhookEnabled``, as in Novu). The provider's reader,
beside its sender, checks the provider's signature and reads its events; they
are recorded by :func:`herald.deliveries.service.record_delivery_events`
against the messages of that environment whose provider id they name. Events
about mail Herald did not send are left out, so the provider is not asked to
retry them.
"""

from __future__ import annotations

import inspect
from urllib.parse import urlsplit

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from herald.deliveries.repository import DeliveryRepository
from herald.deliveries.schemas import WebhookResult
from herald.deliveries.service import record_delivery_events
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, NotFoundError, ServiceUnavailableError
from herald.kit.outbound import OutboundPolicy, OutboundRefused
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
        try:
            response = await self.client.get(url)
        except (httpx.HTTPError, OutboundRefused) as exc:
            raise ServiceUnavailableError(
                f"Herald could not reach {urlsplit(url).hostname}: {type(exc).__name__}"
            ) from None
        if not response.is_success or len(response.content) > MAX_FETCH_BYTES:
            raise ServiceUnavailableError(f"{urlsplit(url).hostname} answered {response.status_code}")
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
    integration = None
    if channel in CHANNELS:
        integration = await DeliveryRepository(session).integration_of(
            organization_id, environment_id, channel, integration_id
        )
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
    read = reader(
        request,
        InboundIntegration(
            provider_id=integration.provider_id,
            credentials=box.open_credentials(integration.credentials),
            configurations=integration.configurations or {},
        ),
    )
    events = await read if inspect.isawaitable(read) else read
    return await record_delivery_events(session, integration, events, skip_unknown=True)
