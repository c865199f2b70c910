"""Emailing an invite's link through the environment's email integration, when it has an active one.

The link goes out through the same provider classes the engine delivers
with (herald/providers), with the integration's own credentials and the
outbound policy (HERALD_OUTBOUND_ALLOW): no mail client of the console's own.
It is a courtesy: the Members page shows the link whatever happens here, and
says whether the email went.
"""

from __future__ import annotations

from markupsafe import escape
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.repository import EngineRepository
from herald.integrations.sending import send_once
from herald.kit.crypto import SecretBox
from herald.kit.outbound import OutboundPolicy
from herald.providers.base import EmailMessage

NO_INTEGRATION = "the environment has no active email integration"


def invite_message(to: str, link: str, inviter: str, role: str) -> EmailMessage:
    subject = "You are invited to Herald"
    text = (
        f"{inviter} invites you to Herald, with the role {role}.\n\n"
        f"Open this link to choose your password and join (it works once, within 7 days):\n{link}\n"
    )
    html = (
        f"<p>{escape(inviter)} invites you to Herald, with the role <strong>{escape(role)}</strong>.</p>"
        f'<p><a href="{escape(link)}">Choose your password and join</a> (the link works once, within 7 days).</p>'
    )
    return EmailMessage(to=[to], subject=subject, html=html, text=text)


async def email_invite(
    session: AsyncSession,
    box: SecretBox,
    outbound: OutboundPolicy,
    environment_id: str,
    *,
    to: str,
    link: str,
    inviter: str,
    role: str,
) -> str | None:
    """Send the invite through the environment's primary active email integration; None when sent, else why not."""
    integrations = await EngineRepository(session).active_integrations(environment_id, "email")
    if not integrations:
        return NO_INTEGRATION
    return await send_once(box, outbound, integrations[0], invite_message(to, link, inviter, role))
