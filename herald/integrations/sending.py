"""Sending one message through one integration, outside a workflow: "Send test" and the invite email.

The message goes out through the provider class the engine delivers with
(herald/providers), with the integration's own credentials, and through the
outbound policy (HERALD_OUTBOUND_ALLOW): nothing here has a client of its own.
The answer is why it was not sent, in the provider's words (which never hold
a credential: providers scrub them), or None when the provider took it.
"""

from __future__ import annotations

import asyncio
import logging
import re

from sqlalchemy.ext.asyncio import AsyncSession

from herald.integrations.repository import IntegrationRepository
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import NotFoundError, ValidationFailed
from herald.kit.outbound import OutboundPolicy
from herald.models import Integration
from herald.providers.base import EmailMessage, ProviderError, SmsMessage
from herald.providers.http import create_http_client
from herald.providers.registry import provider_class

logger = logging.getLogger("herald.integrations")

# A send that takes longer is given up.
SEND_SECONDS = 15.0
# The channels a test message can be sent on: an address or a number is all it needs.
TESTABLE_CHANNELS = frozenset({"email", "sms"})
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_PHONE = re.compile(r"^\+?[0-9][0-9 ().-]{5,30}$")
MAX_RECIPIENT_LENGTH = 320


async def send_once(
    box: SecretBox, outbound: OutboundPolicy, integration: Integration, message: EmailMessage | SmsMessage
) -> str | None:
    """Send ``message`` through ``integration``: None when the provider took it, else why not."""
    provider_type = provider_class(integration.provider_id)
    if provider_type is None:
        return f"the provider {integration.provider_id} is not known"
    async with create_http_client(outbound=outbound) as http:
        provider = provider_type(box.open_credentials(integration.credentials), http, integration_id=integration.id)
        try:
            await asyncio.wait_for(provider.send(message), SEND_SECONDS)
        except ProviderError as exc:
            logger.warning("a send through integration %s failed: %s", integration.id, exc.message)
            return exc.message
        except TimeoutError:
            return f"{integration.provider_id} did not answer within {SEND_SECONDS:g} s"
    return None


def message_for_test(channel: str, to: str) -> EmailMessage | SmsMessage:
    """The test message of ``channel`` to ``to``; 422 naming the field ``to`` when it is no address or number."""
    to = to.strip()
    if channel == "email":
        if len(to) > MAX_RECIPIENT_LENGTH or not _EMAIL.match(to):
            raise ValidationFailed.field("to", "Enter an email address, like name@example.com", to[:MAX_RECIPIENT_LENGTH])
        text = "This is a test email from Herald: the integration can send."
        return EmailMessage(to=[to], subject="Test email from Herald", html=f"<p>{text}</p>", text=text)
    if channel == "sms":
        if not _PHONE.match(to):
            raise ValidationFailed.field("to", "Enter a phone number, like +447700900123", to[:MAX_RECIPIENT_LENGTH])
        return SmsMessage(to=to, content="This is a test message from Herald: the integration can send.")
    raise ValidationFailed.field("to", f"A test message is sent on email and sms only, not {channel}", channel)


async def send_test(
    session: AsyncSession, principal: Principal, box: SecretBox, outbound: OutboundPolicy, integration_id: str, to: str
) -> str | None:
    """Send a test message through one of the environment's integrations: None when sent, else why not."""
    integration = await IntegrationRepository(session).get(principal.environment_id, integration_id)
    if integration is None:
        raise NotFoundError(f"Integration with id {integration_id} not found")
    return await send_once(box, outbound, integration, message_for_test(integration.channel, to))
