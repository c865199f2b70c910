"""A subscriber's channel list: one entry per chat or push integration, with its credentials.

The rule lives here, apart from the use cases, because two places apply it:
the subscriber routes (``PUT``/``PATCH /v1/subscribers/{id}/credentials``,
upserts) and the engine, when a trigger names a subscriber with ``channels``.

A channel's ``webhookUrl`` is a secret (whoever has a Slack or Discord webhook
address can post to it): stored sealed, shown masked (``herald.kit.crypto``),
opened only by the engine to send. A webhookUrl sent as the mask of the
stored one, or as the stored one itself, keeps the stored value. Device tokens
are not secrets (as in Novu): they address a device, they do not authorize.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from herald.kit.crypto import SecretBox, SecretKeyMismatch, is_secret
from herald.models import Integration
from herald.subscribers.schemas import MAX_DEVICE_TOKENS


class TooManyDeviceTokens(ValueError):
    def __init__(self, count: int) -> None:
        super().__init__(
            f"Device tokens limit exceeded. Maximum allowed tokens per subscriber channel is "
            f"{MAX_DEVICE_TOKENS}, but got {count} tokens."
        )


def _dedupe(tokens: list[str]) -> list[str]:
    return list(dict.fromkeys(tokens))


def _seal_given(box: SecretBox | None, given: dict[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` with its secrets sealed; one equal to the stored value (or its mask) keeps the stored value."""
    if box is None:
        return given
    sealed = dict(given)
    for key, value in given.items():
        if not is_secret(key, value):
            continue
        kept = stored.get(key)
        if isinstance(kept, str):
            try:
                plain = box.open(kept)
            except SecretKeyMismatch:
                plain = None
            if plain is not None and value in (plain, box.mask(kept)):
                sealed[key] = kept
                continue
        sealed[key] = box.seal(value)
    return sealed


def open_channel_credentials(box: SecretBox, credentials: Mapping[str, Any]) -> dict[str, Any]:
    """A channel entry's credentials with its secrets opened, to send with."""
    return box.open_credentials(credentials)


def mask_channels(box: SecretBox, channels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The channel list as answers show it: secrets masked (``****`` whole when they cannot be opened)."""
    masked = []
    for entry in channels:
        credentials = entry.get("credentials") or {}
        shown = {}
        for key, value in credentials.items():
            if is_secret(key, value):
                try:
                    value = box.mask(value)
                except SecretKeyMismatch:
                    value = box.mask(value, reveal_edges=False)
            shown[key] = value
        masked.append({**entry, "credentials": shown})
    return masked


def merge_channel(
    channels: list[dict[str, Any]],
    integration: Integration,
    credentials: dict[str, Any],
    *,
    replace: bool,
    box: SecretBox | None = None,
) -> list[dict[str, Any]]:
    """The channel list after setting ``integration``'s credentials.

    An entry is matched by provider and integration, as Novu does. ``replace``
    (PUT) makes the given credentials the entry's whole credentials; otherwise
    (PATCH, upserts, triggers) they are merged in and device tokens are
    appended, without duplicates. Raises :class:`TooManyDeviceTokens` past
    Novu's limit per channel. With ``box`` the given secrets are sealed
    (see the module docstring); without, they are kept as given (a trigger's
    channels, sealed when the trigger was accepted).
    """
    given = dict(credentials)
    if "deviceTokens" in given:
        given["deviceTokens"] = _dedupe(given["deviceTokens"])
    updated: list[dict[str, Any]] = []
    matched = False
    for entry in channels:
        if entry.get("providerId") == integration.provider_id and entry.get("_integrationId") == integration.id:
            matched = True
            given = _seal_given(box, given, entry.get("credentials") or {})
            if replace:
                merged = given
            else:
                merged = {**entry.get("credentials", {}), **given}
                if "deviceTokens" in given:
                    existing = entry.get("credentials", {}).get("deviceTokens") or []
                    merged["deviceTokens"] = _dedupe([*existing, *given["deviceTokens"]])
            entry = {**entry, "integrationIdentifier": integration.identifier, "credentials": merged}
        updated.append(entry)
    if not matched:
        given = _seal_given(box, given, {})
        updated.append(
            {
                "providerId": integration.provider_id,
                "_integrationId": integration.id,
                "integrationIdentifier": integration.identifier,
                "credentials": given,
            }
        )
    for entry in updated:
        tokens = entry["credentials"].get("deviceTokens") or []
        if len(tokens) > MAX_DEVICE_TOKENS:
            raise TooManyDeviceTokens(len(tokens))
    return updated


def pick_integration(
    integrations: list[Integration], provider_id: str, identifier: str | None = None
) -> Integration | None:
    """The newest of ``integrations`` (active, newest first) for a provider, and identifier when given."""
    return next(
        (
            integration
            for integration in integrations
            if integration.provider_id == provider_id and (identifier is None or integration.identifier == identifier)
        ),
        None,
    )


def merge_requested_channels(
    channels: list[dict[str, Any]],
    requested: list[dict[str, Any]],
    integrations: list[Integration],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Merge channels a trigger names for a subscriber (``{providerId, integrationIdentifier?, credentials}``).

    ``integrations`` are the environment's active ones, newest first. Returns
    the new list and, for each requested channel left out, why: a trigger has
    no caller waiting to be told 422, so the reason goes on the record.
    """
    left_out: list[str] = []
    for channel in requested:
        provider_id = channel.get("providerId") or ""
        identifier = channel.get("integrationIdentifier")
        integration = pick_integration(integrations, provider_id, identifier)
        if integration is None:
            named = f" with identifier {identifier}" if identifier else ""
            left_out.append(f"no active integration for provider {provider_id}{named}")
            continue
        credentials = {key: value for key, value in (channel.get("credentials") or {}).items() if value is not None}
        try:
            channels = merge_channel(channels, integration, credentials, replace=False)
        except TooManyDeviceTokens as exc:
            left_out.append(f"{provider_id}: {exc}")
    return channels, left_out


def channels_as_set(channels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The channel list as the console shows it: a secret is only ``"set"``, device tokens are counted.

    ``[{providerId, integrationIdentifier, credentials: {name: shown}}]``; nothing of a secret's value.
    """
    shown = []
    for entry in channels:
        credentials: dict[str, str] = {}
        for key, value in (entry.get("credentials") or {}).items():
            if is_secret(key, value):
                credentials[key] = "set"
            elif key == "deviceTokens" and isinstance(value, list):
                credentials[key] = f"{len(value)} device token{'' if len(value) == 1 else 's'}"
            else:
                credentials[key] = str(value)[:300]
        shown.append(
            {
                "providerId": entry.get("providerId"),
                "integrationIdentifier": entry.get("integrationIdentifier"),
                "credentials": credentials,
            }
        )
    return shown
