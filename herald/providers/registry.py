"""Provider classes by Novu provider id. A new provider is one module plus one line here."""

from __future__ import annotations

from typing import Any

from herald.providers.base import Provider
from herald.providers.chat.discord import DiscordProvider
from herald.providers.chat.mattermost import MattermostProvider
from herald.providers.chat.msteams import MsTeamsProvider
from herald.providers.chat.slack import SlackProvider
from herald.providers.chat.webhook import ChatWebhookProvider
from herald.providers.email.brevo import BrevoProvider
from herald.providers.email.mailgun import MailgunProvider
from herald.providers.email.nodemailer import SmtpProvider
from herald.providers.email.postmark import PostmarkProvider
from herald.providers.email.resend import ResendProvider
from herald.providers.email.sendgrid import SendGridProvider
from herald.providers.email.ses import SesProvider
from herald.providers.push.apns import ApnsProvider
from herald.providers.push.expo import ExpoProvider
from herald.providers.push.fcm import FcmProvider
from herald.providers.push.onesignal import OneSignalProvider
from herald.providers.push.webhook import PushWebhookProvider
from herald.providers.sms.messagebird import MessageBirdProvider
from herald.providers.sms.plivo import PlivoProvider
from herald.providers.sms.sns import SnsProvider
from herald.providers.sms.telnyx import TelnyxProvider
from herald.providers.sms.twilio import TwilioProvider
from herald.providers.sms.vonage import VonageProvider

_CLASSES: tuple[type[Provider[Any]], ...] = (
    # email
    SmtpProvider,
    SendGridProvider,
    MailgunProvider,
    PostmarkProvider,
    ResendProvider,
    SesProvider,
    BrevoProvider,
    # sms
    TwilioProvider,
    VonageProvider,
    PlivoProvider,
    SnsProvider,
    TelnyxProvider,
    MessageBirdProvider,
    # chat
    SlackProvider,
    DiscordProvider,
    MsTeamsProvider,
    MattermostProvider,
    ChatWebhookProvider,
    # push
    FcmProvider,
    ApnsProvider,
    ExpoProvider,
    OneSignalProvider,
    PushWebhookProvider,
)

PROVIDERS: dict[str, type[Provider[Any]]] = {cls.provider_id: cls for cls in _CLASSES}

# Current brand names for providers Novu still files under their old id.
ALIASES: dict[str, str] = {"brevo": "sendinblue", "vonage": "nexmo"}


def provider_class(provider_id: str) -> type[Provider[Any]] | None:
    """The class that sends for ``provider_id``, or None when Herald has no such provider."""
    return PROVIDERS.get(ALIASES.get(provider_id, provider_id))


def providers_for_channel(channel: str) -> list[type[Provider[Any]]]:
    return [cls for cls in PROVIDERS.values() if cls.channel == channel]
