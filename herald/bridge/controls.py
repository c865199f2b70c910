"""Control values of code-first steps: saved in Herald, sent to the bridge as the step's ``controls``.

A step written with the framework declares a ``controlSchema``; the values a team
saves for it (``PUT /v1/bridge/controls/{workflowId}/{stepId}`` with ``{variables}``,
as Novu's API takes them) are kept on the stored step (``controlValues``), kept
across syncs, and sent as ``controls`` on every execute and preview of the step:
the framework validates them against the schema (filling in its defaults) and
hands them to the step's resolver. Novu answers them as a ControlValues entity
(level ``step_controls``); Herald answers the same shape.

Only code-first workflows (``origin: external``) have these: a workflow made in
Herald keeps its controls in the v2 workflow routes.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from herald.bridge import client
from herald.bridge.client import BridgeError
from herald.bridge.repository import BridgeRepository
from herald.bridge.service import signing_key
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import BadRequestError, NotFoundError
from herald.kit.ids import new_id
from herald.kit.outbound import OutboundRefused
from herald.kit.time import isoformat, utcnow
from herald.models import Workflow
from herald.workflows import external
from herald.workflows.repository import WorkflowRepository

# What one step's saved values may weigh, as JSON: controls are texts and settings, not data.
MAX_CONTROL_BYTES = 64 * 1024
LEVEL = "step_controls"


async def _external_step(session: AsyncSession, principal: Principal, workflow_id: str, step_id: str) -> tuple[Workflow, int]:
    """The code-first workflow and the index of its step, or Novu's 404s."""
    found = await WorkflowRepository(session).live_by_identifier(principal.environment_id, [workflow_id])
    workflow = found.get(workflow_id)
    if workflow is None or workflow.origin != external.EXTERNAL:
        raise NotFoundError("Workflow not found")
    for index, step in enumerate(workflow.steps or []):
        if isinstance(step, dict) and step.get("stepId") == step_id:
            return workflow, index
    raise NotFoundError("Step not found")


def entity(principal: Principal, workflow: Workflow, step: dict[str, Any]) -> dict[str, Any] | None:
    """The step's saved values as Novu's ControlValues entity; None when none were saved (Novu answers null)."""
    record = step.get("controlValuesRecord")
    if not isinstance(record, dict):
        return None
    return {
        "_id": record.get("_id"),
        "_environmentId": principal.environment_id,
        "_organizationId": principal.organization_id,
        "_workflowId": workflow.id,
        "_stepId": step.get("_id"),
        "stepId": step.get("stepId"),
        "level": LEVEL,
        "priority": 0,
        "controls": step.get("controlValues") or {},
        "createdAt": record.get("createdAt"),
        "updatedAt": record.get("updatedAt"),
    }


async def get(session: AsyncSession, principal: Principal, workflow_id: str, step_id: str) -> dict[str, Any] | None:
    workflow, index = await _external_step(session, principal, workflow_id, step_id)
    return entity(principal, workflow, workflow.steps[index])


def check_values(values: Any) -> dict[str, Any]:
    """An object of at most MAX_CONTROL_BYTES as JSON, or Novu's 400."""
    if not isinstance(values, dict):
        raise BadRequestError("variables must be an object of control values")
    if len(json.dumps(values, separators=(",", ":"))) > MAX_CONTROL_BYTES:
        raise BadRequestError(f"variables may weigh at most {MAX_CONTROL_BYTES} bytes as JSON")
    return values


async def put(
    session: AsyncSession, principal: Principal, workflow_id: str, step_id: str, values: dict[str, Any]
) -> dict[str, Any]:
    """Save the step's values (replacing the ones before), answered as Novu's entity."""
    workflow, index = await _external_step(session, principal, workflow_id, step_id)
    now = isoformat(utcnow())
    steps = [dict(step) for step in workflow.steps]
    before = steps[index].get("controlValuesRecord") if isinstance(steps[index].get("controlValuesRecord"), dict) else {}
    steps[index]["controlValues"] = check_values(values)
    steps[index]["controlValuesRecord"] = {
        "_id": before.get("_id") or new_id(),
        "createdAt": before.get("createdAt") or now,
        "updatedAt": now,
    }
    # A new list: the JSON column is saved when it is replaced, and the workflow's updated_at moves,
    # which tells the trigger route's kept workflows (events/targets.py) to read it again.
    workflow.steps = steps
    workflow.updated_at = utcnow()
    await session.flush()
    saved = entity(principal, workflow, steps[index])
    assert saved is not None
    return saved


async def preview(
    session: AsyncSession,
    principal: Principal,
    workflow_id: str,
    step_id: str,
    body: dict[str, Any],
    *,
    http: httpx.AsyncClient,
    box: SecretBox,
) -> dict[str, Any]:
    """The step as its bridge previews it (``?action=preview``) with the given controls, else the saved ones.

    Answers the bridge's own answer (``outputs``, ``providers``, ``metadata``);
    a bridge that refuses is Novu's 400 with the framework's message.
    """
    workflow, index = await _external_step(session, principal, workflow_id, step_id)
    step = workflow.steps[index]
    bridge_url = await BridgeRepository(session).bridge_url(principal.environment_id)
    if not bridge_url:
        raise BadRequestError("Bridge URL not found")
    secret_key = await signing_key(session, principal.environment_id, box)
    given = body.get("controls")
    controls = check_values(given) if given is not None else step.get("controlValues") or {}
    event = {
        "payload": body.get("payload") if isinstance(body.get("payload"), dict) else {},
        "controls": controls,
        "state": [],
        "subscriber": body.get("subscriber") if isinstance(body.get("subscriber"), dict) else {},
    }
    # Read only: no transaction is held while the bridge answers.
    await session.close()
    try:
        answer = await client.call(
            http, bridge_url, "preview", secret_key=secret_key, body=event, workflow_id=workflow_id, step_id=step_id
        )
    except OutboundRefused as exc:
        raise BadRequestError(f"The bridge URL cannot be used: {exc}") from None
    except BridgeError as exc:
        raise BadRequestError(exc.message) from None
    return answer.body
