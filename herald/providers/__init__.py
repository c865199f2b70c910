"""Delivery providers: one class per external provider, grouped by channel.

The engine picks a class with :func:`provider_class` from an integration's
``providerId``, builds it with the integration's decrypted credentials and a
shared HTTP client (:func:`create_http_client`), and calls ``send``. Every
failure is a :class:`ProviderError` that says whether retrying can help.
"""

from __future__ import annotations

from herald.providers.base import (
    Attachment,
    ChatMessage,
    ChatProvider,
    EmailMessage,
    EmailProvider,
    Provider,
    ProviderError,
    PushMessage,
    PushProvider,
    SendIdentity,
    SendResult,
    SmsMessage,
    SmsProvider,
)
from herald.providers.http import create_http_client
from herald.providers.registry import PROVIDERS, provider_class, providers_for_channel

__all__ = [
    "PROVIDERS",
    "Attachment",
    "ChatMessage",
    "ChatProvider",
    "EmailMessage",
    "EmailProvider",
    "Provider",
    "ProviderError",
    "PushMessage",
    "PushProvider",
    "SendIdentity",
    "SendResult",
    "SmsMessage",
    "SmsProvider",
    "create_http_client",
    "provider_class",
    "providers_for_channel",
]
