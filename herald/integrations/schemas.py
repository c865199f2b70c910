"""Integration models, named as in the spec (§2.1)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from herald.kit.schemas import RequestSchema, Schema, optional_field

Channel = Literal["in_app", "email", "sms", "chat", "push"]
CHANNELS: tuple[str, ...] = ("in_app", "email", "sms", "chat", "push")
FilterOperator = Literal[
    "LARGER",
    "SMALLER",
    "LARGER_EQUAL",
    "SMALLER_EQUAL",
    "EQUAL",
    "NOT_EQUAL",
    "ALL_IN",
    "ANY_IN",
    "NOT_IN",
    "BETWEEN",
    "NOT_BETWEEN",
    "LIKE",
    "NOT_LIKE",
    "IN",
]
FilterType = Literal["BOOLEAN", "TEXT", "DATE", "NUMBER", "STATEMENT", "LIST", "MULTI_LIST", "GROUP"]


class Credentials(Schema):
    """Provider credentials; every field optional. Unknown keys are kept (``<provider>BaseUrl``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)

    apiKey: str = optional_field()
    user: str = optional_field()
    secretKey: str = optional_field()
    domain: str = optional_field()
    password: str = optional_field()
    host: str = optional_field()
    port: str = optional_field()
    region: str = optional_field()
    accountSid: str = optional_field()
    messageProfileId: str = optional_field()
    token: str = optional_field()
    # ``from`` is a Python keyword, hence the alias.
    from_: str = optional_field(alias="from")
    senderName: str = optional_field()
    projectName: str = optional_field()
    applicationId: str = optional_field()
    clientId: str = optional_field()
    baseUrl: str = optional_field()
    webhookUrl: str = optional_field()
    redirectUrl: str = optional_field()
    serviceAccount: str = optional_field()
    ipPoolName: str = optional_field()
    apiKeyRequestHeader: str = optional_field()
    secretKeyRequestHeader: str = optional_field()
    idPath: str = optional_field()
    datePath: str = optional_field()
    apiToken: str = optional_field()
    authenticationTokenKey: str = optional_field()
    instanceId: str = optional_field()
    alertUid: str = optional_field()
    title: str = optional_field()
    imageUrl: str = optional_field()
    state: str = optional_field()
    externalLink: str = optional_field()
    channelId: str = optional_field()
    phoneNumberIdentification: str = optional_field()
    accessKey: str = optional_field()
    appSid: str = optional_field()
    senderId: str = optional_field()
    secure: bool = optional_field()
    requireTls: bool = optional_field()
    ignoreTls: bool = optional_field()
    hmac: bool = optional_field()
    authenticateByToken: bool = optional_field()
    tlsOptions: dict[str, Any] = optional_field()


class Configurations(Schema):
    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)

    inboundWebhookEnabled: bool = optional_field()
    inboundWebhookSigningKey: str = optional_field()


class FieldFilterPart(Schema):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True, coerce_numbers_to_str=True)

    field: str
    value: str
    operator: FilterOperator
    # "tenant" (one of Novu's FilterPartTypeEnum values) compares the trigger's
    # tenant: identifier, name, data.* (docs/filters.md).
    on: Literal["subscriber", "payload", "tenant"]


class StepFilter(Schema):
    isNegated: bool = False
    type: FilterType = "GROUP"
    value: Literal["AND", "OR"] = "AND"
    children: list[FieldFilterPart] = Field(default_factory=list)


class IntegrationHealth(Schema):
    """How the integration has fared lately: healthy, failing (since when), skipped (until when) or half-open."""

    status: Literal["healthy", "failing", "skipped", "half-open"]
    failingSince: str = optional_field()
    skippedUntil: str = optional_field()
    consecutiveFailures: int = 0
    lastError: str = optional_field()


class Integration(Schema):
    """The Integration response object (spec §2.1)."""

    id: str = Field(alias="_id")
    environment_id: str = Field(alias="_environmentId")
    organization_id: str = Field(alias="_organizationId")
    name: str
    identifier: str
    providerId: str
    channel: Channel
    credentials: Credentials
    configurations: Configurations = optional_field()
    active: bool
    deleted: bool
    deletedAt: str = optional_field()
    deletedBy: str = optional_field()
    primary: bool
    conditions: list[StepFilter] = Field(default_factory=list)
    priority: int = 0
    # Herald's: the circuit breaker of provider failover (docs/delivery.md#failover).
    health: IntegrationHealth = optional_field()
    createdAt: str
    updatedAt: str


class CreateIntegrationRequest(RequestSchema):
    providerId: str = Field(min_length=1, max_length=100)
    channel: Channel
    name: str | None = Field(default=None, max_length=200)
    identifier: str | None = Field(default=None, min_length=1, max_length=200)
    credentials: Credentials | None = None
    active: bool = False
    check: bool = False
    conditions: list[StepFilter] | None = None
    configurations: Configurations | None = None
    # Failover order among the channel's active integrations: higher first, after the primary.
    priority: int | None = Field(default=None, ge=0, le=1_000_000)


class UpdateIntegrationRequest(RequestSchema):
    name: str | None = Field(default=None, min_length=1, max_length=200)
    identifier: str | None = Field(default=None, min_length=1, max_length=200)
    active: bool | None = None
    credentials: Credentials | None = None
    check: bool | None = None
    conditions: list[StepFilter] | None = None
    configurations: Configurations | None = None
    # Failover order among the channel's active integrations: higher first, after the primary.
    priority: int | None = Field(default=None, ge=0, le=1_000_000)
