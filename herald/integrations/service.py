"""Integration use cases.

Primary and priority follow Novu: the primary of a channel is the one that
delivers email and sms; priorities order the active integrations of a channel
(the primary highest). Herald lets every channel have a primary. The order is
the failover order (docs/delivery.md#failover): the primary first, then the
others by ``priority``, higher first, which a create or update may set; a
set-primary, a deactivation or a delete renumbers the channel keeping its order.

What an integration may be (422 with the field named, otherwise):

- its ``providerId`` is one Herald sends with (``providers/registry.py``, the
  current brand names included) and ``channel`` is that provider's channel;
  ``novu`` is the in_app provider (Herald's inbox needs no credentials). An
  unknown provider is refused with the list of the channel's providers. This
  holds for every create; an update is checked against it when it leaves the
  integration active (an inactive one, made before this rule, can still be
  renamed, deactivated or deleted);
- an integration that is active (created active, updated to active, or made
  primary, which makes it active) has every credential its provider cannot
  send without (``required_credentials`` on the provider class). An inactive
  one may be incomplete: it is a draft that sends nothing, filled in before it
  is switched on. Blank values count as missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine import breaker
from herald.integrations.repository import IntegrationRepository
from herald.integrations.schemas import CreateIntegrationRequest, UpdateIntegrationRequest
from herald.integrations.schemas import Integration as IntegrationSchema
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox, SecretKeyMismatch
from herald.kit.errors import BadRequestError, ConflictError, MisconfiguredError, NotFoundError, ValidationFailed
from herald.kit.ids import short_id
from herald.kit.schemas import compact
from herald.kit.text import slugify
from herald.kit.time import isoformat, utcnow
from herald.models import Integration, IntegrationHealth
from herald.providers.registry import ALIASES, PROVIDERS, provider_class

# Novu's provider id of its own inbox (InAppProviderIdEnum.Novu).
IN_APP_PROVIDER_ID = "novu"

# Channels where a new active integration takes part in primary selection on
# creation (Novu's CHANNELS_WITH_PRIMARY).
AUTO_PRIMARY_CHANNELS = frozenset({"email", "sms"})


def supported_provider_ids(channel: str) -> list[str]:
    """The providerIds Herald sends with on ``channel``: Novu's ids, and the current brand names that stand for them."""
    if channel == "in_app":
        return [IN_APP_PROVIDER_ID]
    ids = [provider_id for provider_id, cls in PROVIDERS.items() if cls.channel == channel]
    ids += [alias for alias, provider_id in ALIASES.items() if provider_id in ids]
    return sorted(ids)


def check_provider(provider_id: str, channel: str) -> None:
    """Refuse a providerId Herald has no provider for, or one of another channel (see the module docstring)."""
    if channel == "in_app" and provider_id == IN_APP_PROVIDER_ID:
        return
    cls = provider_class(provider_id)
    if cls is None or channel == "in_app":
        raise ValidationFailed.field(
            "providerId",
            f"Unknown provider {provider_id} for channel {channel}; "
            f"supported: {', '.join(supported_provider_ids(channel))}",
            provider_id,
        )
    if cls.channel != channel:
        raise ValidationFailed.field(
            "channel",
            f"Provider {provider_id} sends {cls.channel}, not {channel}: use channel {cls.channel}",
            channel,
        )


def check_credentials(provider_id: str, channel: str, credentials: dict | None) -> None:
    """Refuse an active integration without a credential its provider cannot send without."""
    cls = provider_class(provider_id) if channel != "in_app" else None
    if cls is None:
        return
    given = credentials or {}
    for name in cls.required_credentials:
        value = given.get(name)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValidationFailed.field(
                f"credentials.{name}",
                f"{provider_id} cannot send without credentials.{name}; it is required to make the integration "
                f"active (required: {', '.join(cls.required_credentials)}). Save it inactive to fill it in later.",
                value,
            )


def display_name(provider_id: str) -> str:
    return " ".join(part.capitalize() for part in provider_id.replace("_", "-").split("-")) or provider_id


async def present(
    session: AsyncSession, integrations: Sequence[Integration], box: SecretBox, principal: Principal
) -> list[IntegrationSchema]:
    """The Integration objects with their ``health`` (the failover breaker's state), as the caller may see them."""
    health = await IntegrationRepository(session).health_of([integration.id for integration in integrations])
    return to_schemas(integrations, box, principal, health)


async def present_one(session: AsyncSession, integration: Integration, box: SecretBox, principal: Principal) -> IntegrationSchema:
    return (await present(session, [integration], box, principal))[0]


def to_schema(integration: Integration, box: SecretBox, principal: Principal) -> IntegrationSchema:
    return to_schemas([integration], box, principal)[0]


def to_schemas(
    integrations: Sequence[Integration],
    box: SecretBox,
    principal: Principal,
    health: Mapping[str, IntegrationHealth] | None = None,
) -> list[IntegrationSchema]:
    """The Integration objects as the caller may see them: secrets masked.

    Secrets (credentials' and the webhook signing key of ``configurations``)
    are write-only (``herald.kit.crypto``): the caller's own
    environment's show their mask (``SG.****ab12``), another environment's
    (``GET /v1/integrations/active`` is organization-wide) are ``****`` whole,
    so a secret never leaves its environment. Secrets sealed under another
    HERALD_SECRET_KEY cannot be masked, and answering without them would
    invite a client to write the credentials back without them: the answer is
    a 500 that says why and which integrations, so the operator can set the
    right key or send those credentials again (PUT /v1/integrations/{id}).
    """
    shaped: list[IntegrationSchema] = []
    unreadable: list[str] = []
    for integration in integrations:
        try:
            shaped.append(
                _schema(
                    integration,
                    box,
                    own=integration.environment_id == principal.environment_id,
                    health=(health or {}).get(integration.id),
                )
            )
        except SecretKeyMismatch:
            unreadable.append(integration.id)
    if unreadable:
        raise MisconfiguredError(
            "Integration secrets cannot be decrypted: HERALD_SECRET_KEY differs from the key they were stored "
            f"with (integrations {', '.join(unreadable)}). Run Herald with that key, or send these integrations' "
            "credentials again with PUT /v1/integrations/{integrationId}."
        )
    return shaped


def _schema(integration: Integration, box: SecretBox, *, own: bool, health: IntegrationHealth | None = None) -> IntegrationSchema:
    return IntegrationSchema.model_validate(
        compact({
            "_id": integration.id,
            "_environmentId": integration.environment_id,
            "_organizationId": integration.organization_id,
            "name": integration.name,
            "identifier": integration.identifier,
            "providerId": integration.provider_id,
            "channel": integration.channel,
            "credentials": box.mask_credentials(integration.credentials, reveal_edges=own),
            "configurations": box.mask_configurations(integration.configurations, reveal_edges=own),
            "active": integration.active,
            "deleted": integration.deleted,
            "deletedAt": isoformat(integration.deleted_at),
            "deletedBy": integration.deleted_by,
            "primary": integration.primary,
            "conditions": integration.conditions or [],
            "priority": integration.priority,
            "health": _health(health, own=own),
            "createdAt": isoformat(integration.created_at),
            "updatedAt": isoformat(integration.updated_at),
        })
    )


def _health(health: IntegrationHealth | None, *, own: bool) -> dict[str, object]:
    """The breaker's state; its last error (a provider's words) only to the integration's own environment."""
    shown = breaker.describe(health, breaker.now())
    if not own:
        shown.pop("lastError", None)
    return shown


def _dump(model: object | None) -> dict | None:
    if model is None:
        return None
    return model.model_dump(by_alias=True, exclude_none=True)  # type: ignore[attr-defined]


async def _require(repository: IntegrationRepository, principal: Principal, integration_id: str) -> Integration:
    integration = await repository.get(principal.environment_id, integration_id)
    if integration is None:
        raise NotFoundError(f"Integration with id {integration_id} not found")
    return integration


async def create_integration(
    session: AsyncSession, principal: Principal, box: SecretBox, request: CreateIntegrationRequest
) -> Integration:
    check_provider(request.providerId, request.channel)
    credentials = _dump(request.credentials)
    if request.active:
        check_credentials(request.providerId, request.channel, credentials)
    repository = IntegrationRepository(session)
    name = request.name or display_name(request.providerId)
    if request.identifier is not None:
        identifier = request.identifier
        if await repository.identifier_taken(principal.environment_id, identifier):
            raise ConflictError("Integration with identifier already exists")
    else:
        identifier = f"{slugify(name) or 'integration'}-{short_id()}"
    integration = Integration(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        provider_id=request.providerId,
        channel=request.channel,
        name=name,
        identifier=identifier,
        credentials=box.seal_credentials(credentials),
        configurations=box.seal_configurations(_dump(request.configurations)),
        conditions=[_dump(item) for item in request.conditions or []],
        active=request.active,
        primary=False,
        priority=0,
    )
    if integration.active and integration.channel in AUTO_PRIMARY_CHANNELS:
        await repository.lock_channel(integration.environment_id, integration.channel)
        await _place_newly_active(repository, integration, make_primary_if_none=True, priority=request.priority)
    elif request.priority is not None:
        integration.priority = request.priority
    repository.add(integration)
    await session.flush()
    return integration


async def _place_newly_active(
    repository: IntegrationRepository, integration: Integration, *, make_primary_if_none: bool, priority: int | None = None
) -> None:
    """Give an integration that just became active its priority (and primary, if none).

    A ``priority`` the request gives is kept as it is: the caller orders the
    fallbacks (the primary comes first whatever its number).
    """
    others = [i for i in await repository.active_of_channel(integration.environment_id, integration.channel, for_update=True) if i.id != integration.id]
    highest = others[0] if others else None
    if priority is not None:
        integration.priority = priority
        integration.primary = make_primary_if_none and not any(other.primary for other in others)
    elif highest is not None and highest.primary:
        # The primary stays on top; the newcomer takes its old place.
        integration.priority = highest.priority
        highest.priority += 1
    else:
        integration.priority = highest.priority + 1 if highest else 1
        integration.primary = make_primary_if_none


async def _recalculate_priorities(repository: IntegrationRepository, environment_id: str, channel: str, first: Integration | None = None) -> None:
    ordered = [i for i in await repository.active_of_channel(environment_id, channel) if first is None or i.id != first.id]
    if first is not None:
        ordered.insert(0, first)
    for index, item in enumerate(ordered):
        item.priority = len(ordered) - index


async def list_integrations(session: AsyncSession, principal: Principal, *, active_only: bool) -> Sequence[Integration]:
    return await IntegrationRepository(session).list_for_organization(principal.organization_id, active_only=active_only)


async def update_integration(
    session: AsyncSession, principal: Principal, box: SecretBox, integration_id: str, request: UpdateIntegrationRequest
) -> Integration:
    repository = IntegrationRepository(session)
    integration = await _require(repository, principal, integration_id)
    given = request.model_fields_set - {"check"}
    if not given:
        raise BadRequestError("No properties found for update")
    if request.active if request.active is not None else integration.active:
        check_provider(integration.provider_id, integration.channel)
        # A secret sent as its mask is there: what is stored is kept (SecretBox.seal_credentials).
        effective = _dump(request.credentials) if "credentials" in given else integration.credentials
        check_credentials(integration.provider_id, integration.channel, effective)
    if request.identifier is not None and request.identifier != integration.identifier:
        if await repository.identifier_taken(principal.environment_id, request.identifier, excluding_id=integration.id):
            raise ConflictError("Integration with identifier already exists")
        integration.identifier = request.identifier
    if request.name is not None:
        integration.name = request.name
    if "credentials" in given:
        # A secret sent back as it was shown (its mask) keeps the stored one.
        integration.credentials = box.seal_credentials(_dump(request.credentials), stored=integration.credentials)
    if "configurations" in given:
        # The signing key sent back as its mask keeps the stored one, as for credentials.
        integration.configurations = box.seal_configurations(
            _dump(request.configurations), stored=integration.configurations
        )
    if "conditions" in given:
        integration.conditions = [_dump(item) for item in request.conditions or []]
        if integration.conditions and integration.primary:
            # A primary is unconditional by definition; conditional ones are chosen by their conditions.
            integration.primary = False
    if request.active is not None and request.active != integration.active:
        await repository.lock_channel(integration.environment_id, integration.channel)
        integration.active = request.active
        if request.active:
            await _place_newly_active(repository, integration, make_primary_if_none=False, priority=request.priority)
        else:
            integration.primary = False
            integration.priority = 0
            await session.flush()
            await _recalculate_priorities(repository, integration.environment_id, integration.channel)
    elif request.priority is not None:
        if integration.active:
            await repository.lock_channel(integration.environment_id, integration.channel)
        integration.priority = request.priority
    integration.updated_at = utcnow()
    await session.flush()
    return integration


async def delete_integration(session: AsyncSession, principal: Principal, integration_id: str) -> Sequence[Integration]:
    """Soft-delete; answers with the environment's remaining integrations, as Novu does."""
    repository = IntegrationRepository(session)
    integration = await _require(repository, principal, integration_id)
    integration.deleted = True
    integration.deleted_at = utcnow()
    integration.deleted_by = principal.api_key_id
    integration.active = False
    integration.primary = False
    integration.priority = 0
    await session.flush()
    await _recalculate_priorities(repository, integration.environment_id, integration.channel)
    await session.flush()
    return await repository.list_for_environment(principal.environment_id)


async def set_primary(session: AsyncSession, principal: Principal, integration_id: str) -> Integration:
    """Make an integration the one primary of its channel in its environment.

    The other integrations of the channel lose primary and stay active; this
    one is made active; its conditions are cleared (a primary applies
    unconditionally) and priorities are renumbered with it on top.
    """
    repository = IntegrationRepository(session)
    integration = await _require(repository, principal, integration_id)
    if integration.primary and integration.active:
        return integration
    # Concurrent set-primary calls of a channel run one after the other: the
    # last one wins, and none fails on the one-primary index.
    await repository.lock_channel(integration.environment_id, integration.channel)
    await session.refresh(integration)  # as the call we waited for left it
    if integration.deleted:
        raise NotFoundError(f"Integration with id {integration_id} not found")
    if not integration.active:
        # Becoming primary makes it active: it must be able to send.
        check_provider(integration.provider_id, integration.channel)
        check_credentials(integration.provider_id, integration.channel, integration.credentials)
    await repository.demote_primaries(integration.environment_id, integration.channel, except_id=integration.id)
    integration.active = True
    integration.primary = True
    integration.conditions = []
    integration.updated_at = utcnow()
    await session.flush()
    await _recalculate_priorities(repository, integration.environment_id, integration.channel, first=integration)
    await session.flush()
    return integration


async def environment_integrations(session: AsyncSession, principal: Principal) -> Sequence[Integration]:
    """The integrations of the caller's environment (the console's list; the API's is organization-wide)."""
    return await IntegrationRepository(session).list_for_environment(principal.environment_id)


async def get_integration(session: AsyncSession, principal: Principal, integration_id: str) -> Integration:
    """One integration of the caller's environment; 404 when it has none of that id."""
    return await _require(IntegrationRepository(session), principal, integration_id)
