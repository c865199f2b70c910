"""The served OpenAPI document names its models as the spec does, with the spec's required fields."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from herald.app import create_app
from herald.config import load_settings

# Spec §2: model name -> the fields it marks as present in every response (or required).
SPEC_MODELS: dict[str, set[str]] = {
    "Integration": {
        "_environmentId", "_organizationId", "name", "identifier", "providerId", "channel", "credentials",
        "active", "deleted", "primary",
    },
    "Credentials": set(),
    "Configurations": set(),
    "StepFilter": set(),
    "FieldFilterPart": {"field", "value", "operator", "on"},
    "Message": {
        "_environmentId", "_organizationId", "_notificationId", "_subscriberId", "createdAt", "transactionId",
        "channel", "read", "seen", "cta", "status",
    },
    "EmailBlock": {"type", "content"},
    "MessageCTA": set(),
    "MessageAction": set(),
    "MessageButton": {"type", "content"},
    "Subscriber": {"subscriberId", "_organizationId", "_environmentId", "deleted", "createdAt", "updatedAt"},
    "ChannelSettings": {"providerId", "credentials", "_integrationId"},
    "ChannelCredentials": set(),
    "Workflow": {
        "name", "description", "active", "draft", "preferenceSettings", "critical", "tags", "steps",
        "_organizationId", "_creatorId", "_environmentId", "_notificationGroupId", "triggers", "deleted",
        "deletedAt", "deletedBy",
    },
    "NotificationGroup": {"name", "_environmentId", "_organizationId"},
    "NotificationTrigger": {"type", "identifier", "variables"},
    "NotificationStep": set(),
    "TimedConfig": set(),
    "DigestRegularMetadata": {"type"},
    "DigestTimedMetadata": {"type"},
    "DelayRegularMetadata": {"type"},
    "DelayScheduledMetadata": {"type", "delayPath"},
    "TriggerEventResponse": {"acknowledged", "status"},
}
METADATA_KINDS = ["DigestRegularMetadata", "DigestTimedMetadata", "DelayRegularMetadata", "DelayScheduledMetadata"]


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """GET /openapi.json of an app of its own (the document does not depend on the store)."""
    data_dir: Path = tmp_path_factory.mktemp("openapi")
    app = create_app(load_settings(data_dir=data_dir, secret_key="openapi-test"))
    transport = httpx.ASGITransport(app=app)

    async def fetch() -> dict[str, Any]:
        async with httpx.AsyncClient(transport=transport, base_url="http://herald.test") as client:
            response = await client.get("/openapi.json")
            assert response.status_code == 200
            return response.json()

    yield asyncio.run(fetch())


def _refs(schema: Any) -> set[str]:
    return {value.rsplit("/", 1)[-1] for value in _walk(schema, "$ref")}


def _walk(node: Any, key: str) -> Iterator[str]:
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key and isinstance(value, str):
                yield value
            else:
                yield from _walk(value, key)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, key)


@pytest.mark.parametrize("name", sorted(SPEC_MODELS))
def test_the_spec_model_is_a_component_with_its_required_fields(document: dict[str, Any], name: str) -> None:
    components = document["components"]["schemas"]
    assert name in components, sorted(components)
    required = set(components[name].get("required", []))
    assert SPEC_MODELS[name] <= required, SPEC_MODELS[name] - required
    assert SPEC_MODELS[name] <= components[name]["properties"].keys()


def test_one_name_per_model(document: dict[str, Any]) -> None:
    names = set(document["components"]["schemas"])
    assert not [name for name in names if name.endswith(("-Input", "-Output"))]
    assert "MessageCta" not in names  # the spec's is MessageCTA


def test_models_refer_to_each_other_as_in_the_spec(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    message = components["Message"]["properties"]
    assert _refs(message["content"]) == {"EmailBlock"}
    assert _refs(message["cta"]) == {"MessageCTA"}
    assert _refs(components["MessageCTA"]["properties"]["action"]) == {"MessageAction"}
    assert _refs(components["MessageAction"]["properties"]["buttons"]) == {"MessageButton"}
    assert components["EmailBlock"]["properties"]["styles"]
    assert _refs(components["Workflow"]["properties"]["steps"]) == {"NotificationStep"}
    assert _refs(components["Workflow"]["properties"]["triggers"]) == {"NotificationTrigger"}
    assert _refs(components["Subscriber"]["properties"]["channels"]) == {"ChannelSettings"}
    assert _refs(components["ChannelSettings"]["properties"]["credentials"]) == {"ChannelCredentials"}
    # Step metadata is one of the four kinds, in responses and in requests.
    for model in ("NotificationStep", "StepVariantRequest"):
        assert _refs(components[model]["properties"]["metadata"]) == set(METADATA_KINDS), model
    assert _refs(components["DigestTimedMetadata"]["properties"]["timed"]) == {"TimedConfig"}
    at_time = json.dumps(components["TimedConfig"]["properties"]["atTime"])
    assert "subscriber's timezone" in at_time
