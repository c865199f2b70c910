"""Novu's bridge use cases: sync an environment's code-first workflows from its bridge, and look at the bridge.

``novu sync`` (the CLI) posts the bridge's URL; Herald asks the bridge what
workflows it serves (a signed ``GET ?action=discover``), stores them as
external workflows (herald/workflows/external.py) and records the URL on the
environment, where the engine calls it at send time (herald/bridge/engine.py).
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.bridge import client
from herald.bridge.client import BridgeError
from herald.bridge.repository import BridgeRepository
from herald.bridge.schemas import DiscoverAnswer, DiscoveredWorkflow, SyncRequest
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, MisconfiguredError
from herald.kit.outbound import OutboundRefused
from herald.workflows import external
from herald.workflows.repository import WorkflowRepository
from herald.workflows.service import WorkflowView


async def signing_key(session: AsyncSession, environment_id: str, box: SecretBox) -> str:
    """The key the environment's bridge requests are signed with (its oldest API key in use)."""
    sealed = await BridgeRepository(session).sealed_signing_key(environment_id)
    if sealed is None:
        raise MisconfiguredError("The environment has no API key to sign bridge requests with")
    return box.open(sealed)


def check_url(bridge_url: str) -> str:
    """An http(s) URL with a host, or Novu's 400."""
    url = bridge_url.strip()
    parsed = httpx.URL(url) if url.startswith(("http://", "https://")) else None
    if parsed is None or not parsed.host:
        raise BadRequestError(f"The bridge URL {bridge_url[:200]!r} is not an http(s) URL")
    return url


def to_external(found: DiscoveredWorkflow) -> external.ExternalWorkflow:
    payload_schema = (found.payload or {}).get("schema")
    return external.ExternalWorkflow(
        workflow_id=found.workflowId,
        name=found.name or found.workflowId,
        description=found.description or "",
        tags=tuple(found.tags),
        severity=found.severity or "none",
        active=found.active is not False,
        preferences=found.preferences or {},
        payload_schema=payload_schema if isinstance(payload_schema, dict) else None,
        steps=tuple(
            external.ExternalStep(
                step_id=step.stepId,
                type=step.type,
                controls_schema=(step.controls or {}).get("schema"),
                outputs_schema=(step.outputs or {}).get("schema"),
                options=step.options or {},
            )
            for step in found.steps
        ),
    )


async def discover(http: httpx.AsyncClient, bridge_url: str, secret_key: str) -> list[DiscoveredWorkflow]:
    """The workflows the bridge serves; Novu's 400 when it cannot be asked or answers something else."""
    try:
        answer = await client.call(http, bridge_url, "discover", secret_key=secret_key)
    except OutboundRefused as exc:
        raise BadRequestError(f"The bridge URL cannot be used: {exc}") from None
    except BridgeError as exc:
        raise BadRequestError(f"Could not discover the workflows of the bridge at {bridge_url}: {exc.message}") from None
    try:
        return DiscoverAnswer.model_validate(answer.body).workflows
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise BadRequestError(f"The bridge's discover answer cannot be used: {where}: {first['msg']}") from None


async def sync(
    session: AsyncSession, principal: Principal, request: SyncRequest, *, http: httpx.AsyncClient, box: SecretBox
) -> list[WorkflowView]:
    bridge_url = check_url(request.bridgeUrl)
    found = await discover(http, bridge_url, await signing_key(session, principal.environment_id, box))
    if not found:
        raise BadRequestError(f"The bridge at {bridge_url} serves no workflow")
    stored = await external.store_external(session, principal, [to_external(workflow) for workflow in found])
    await BridgeRepository(session).record_bridge_url(principal.environment_id, bridge_url)
    return stored


async def health_check(http: httpx.AsyncClient, bridge_url: str, secret_key: str) -> dict[str, Any]:
    try:
        answer = await client.call(http, bridge_url, "health-check", secret_key=secret_key)
    except OutboundRefused as exc:
        raise BadRequestError(f"The bridge URL cannot be used: {exc}") from None
    except BridgeError as exc:
        raise BadRequestError(f"Bridge is not accessible. {exc.message}") from None
    return answer.body


async def status(session: AsyncSession, principal: Principal, *, http: httpx.AsyncClient, box: SecretBox) -> dict[str, Any]:
    """The health check of the environment's bridge (its last sync's URL)."""
    bridge_url = await BridgeRepository(session).bridge_url(principal.environment_id)
    if not bridge_url:
        raise BadRequestError("Bridge URL not found")
    return await health_check(http, bridge_url, await signing_key(session, principal.environment_id, box))


async def validate(
    session: AsyncSession, principal: Principal, bridge_url: str, *, http: httpx.AsyncClient, box: SecretBox
) -> bool:
    """Whether ``bridge_url`` answers the framework's health check with ``status: ok``."""
    try:
        answer = await health_check(http, check_url(bridge_url), await signing_key(session, principal.environment_id, box))
    except BadRequestError:
        return False
    return answer.get("status") == "ok"


async def diff(session: AsyncSession, principal: Principal, request: SyncRequest) -> dict[str, Any]:
    """What is stored (the external workflows and the bridge URL) beside what was sent, as Novu answers it."""
    bridge_url = await BridgeRepository(session).bridge_url(principal.environment_id)
    if not bridge_url:
        raise BadRequestError("Bridge URL not found")
    stored = await WorkflowRepository(session).of_origin(principal.environment_id, external.EXTERNAL)
    return {
        "current": {"workflows": [external.definition(workflow) for workflow in stored], "bridgeUrl": bridge_url},
        "new": request.model_dump(exclude_none=True),
    }
