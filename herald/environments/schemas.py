"""Environment models, named as Novu's environment DTOs (v1 management, v2 change management)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema, optional_field


class ApiKey(Schema):
    key: str
    user_id: str = Field(alias="_userId")


class EnvironmentResponse(Schema):
    id: str = Field(alias="_id")
    name: str
    organization_id: str = Field(alias="_organizationId")
    identifier: str
    type: str | None = None
    # Takes changes only from its own API keys (herald/environments/protection.py); not in Novu's answer.
    protected: bool
    # Only in the answer that made the environment: a key is shown once, when it is made.
    apiKeys: list[ApiKey] | None = optional_field()
    parent_id: str | None = optional_field(alias="_parentId")
    slug: str


class CreateEnvironmentRequest(RequestSchema):
    name: str = Field(min_length=1, max_length=100)
    color: str | None = Field(default=None, max_length=32)
    parentId: str | None = None


class UpdateEnvironmentRequest(RequestSchema):
    """Only the fields sent change; ``dns`` and ``bridge`` are accepted and ignored (Herald has neither).

    ``protected`` is Herald's own: changed only with the environment's own API key.
    """

    name: str | None = Field(default=None, min_length=1, max_length=100)
    identifier: str | None = Field(default=None, min_length=1, max_length=64)
    protected: bool | None = None
    parentId: str | None = None
    color: str | None = Field(default=None, max_length=32)


class EnvironmentTag(Schema):
    name: str


class DiffEnvironmentRequest(RequestSchema):
    sourceEnvironmentId: str | None = None


class ResourceToPublish(RequestSchema):
    resourceType: str
    resourceId: str


class PublishEnvironmentRequest(RequestSchema):
    sourceEnvironmentId: str | None = None
    dryRun: bool = False
    resources: list[ResourceToPublish] | None = None


class ResourceInfo(Schema):
    id: str | None = None
    name: str | None = None
    updatedAt: str | None = None


class ResourceChanges(Schema):
    previous: dict[str, Any] | None = None
    new: dict[str, Any] | None = None


class ResourceDiff(Schema):
    resourceType: str
    action: str
    sourceResource: ResourceInfo | None = None
    targetResource: ResourceInfo | None = None
    diffs: ResourceChanges | None = optional_field()
    stepType: str | None = optional_field()
    previousIndex: int | None = optional_field()
    newIndex: int | None = optional_field()


class DiffSummary(Schema):
    added: int
    modified: int
    deleted: int
    unchanged: int


class ResourceDiffResult(Schema):
    resourceType: str
    sourceResource: ResourceInfo | None = None
    targetResource: ResourceInfo | None = None
    changes: list[ResourceDiff]
    summary: DiffSummary


class EnvironmentDiffSummary(Schema):
    totalEntities: int
    totalChanges: int
    hasChanges: bool


class DiffEnvironmentResponse(Schema):
    sourceEnvironmentId: str
    targetEnvironmentId: str
    resources: list[ResourceDiffResult]
    summary: EnvironmentDiffSummary


class SyncedResource(Schema):
    resourceType: str
    resourceId: str
    resourceName: str
    action: str


class FailedResource(Schema):
    resourceType: str
    resourceId: str
    resourceName: str
    error: str


class SkippedResource(Schema):
    resourceType: str
    resourceId: str
    resourceName: str
    reason: str


class SyncResult(Schema):
    resourceType: str
    successful: list[SyncedResource]
    failed: list[FailedResource]
    skipped: list[SkippedResource]
    totalProcessed: int


class PublishSummary(Schema):
    resources: int
    successful: int
    failed: int
    skipped: int


class PublishEnvironmentResponse(Schema):
    results: list[SyncResult]
    summary: PublishSummary
