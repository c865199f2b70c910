"""Environment variable models, named as Novu's environment variable DTOs."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from herald.kit.schemas import RequestSchema, Schema

# Novu's rule for a key: a letter, then letters, digits and underscores; templates read it as {{env.KEY}}.
KEY_PATTERN = r"^[A-Za-z][A-Za-z0-9_]*$"


class EnvironmentVariableValue(RequestSchema):
    environment_id: str = Field(alias="_environmentId", min_length=1, max_length=24)
    value: str = Field(max_length=10_000)


class CreateEnvironmentVariableRequest(RequestSchema):
    key: str = Field(min_length=1, max_length=256, pattern=KEY_PATTERN)
    type: Literal["string"] = "string"
    isSecret: bool = False
    values: list[EnvironmentVariableValue] | None = None


class UpdateEnvironmentVariableRequest(RequestSchema):
    """Only the fields sent change; ``values`` replaces every environment's value."""

    key: str | None = Field(default=None, min_length=1, max_length=256, pattern=KEY_PATTERN)
    type: Literal["string"] | None = None
    isSecret: bool | None = None
    values: list[EnvironmentVariableValue] | None = None


class EnvironmentVariableValueResponse(Schema):
    environment_id: str = Field(alias="_environmentId")
    value: str


class EnvironmentVariableResponse(Schema):
    id: str = Field(alias="_id")
    organization_id: str = Field(alias="_organizationId")
    key: str
    type: str
    isSecret: bool
    values: list[EnvironmentVariableValueResponse]
    createdAt: str
    updatedAt: str


class EnvironmentVariableWorkflow(Schema):
    name: str
    workflowId: str


class EnvironmentVariableUsage(Schema):
    workflows: list[EnvironmentVariableWorkflow]
