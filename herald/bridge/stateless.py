"""Triggers that carry ``bridgeUrl``: the workflow is discovered on that bridge and run there, without a sync.

The framework's own ``workflow.trigger()`` adds ``bridgeUrl`` (``NOVU_BRIDGE_ORIGIN`` + ``/api/novu``)
to the trigger it sends, and Novu then runs the workflow "stateless": it asks that bridge what the
workflow is (a signed ``GET ?action=discover``) instead of reading a stored one, and executes every
step on that same URL. Herald does the same: the discovered workflow becomes the trigger's target
for this one trigger (nothing is stored), and each of its steps carries the URL (``bridgeUrl``),
which the engine calls instead of the environment's last sync (herald/engine/steps/bridged.py).

The trigger's ``controls`` (``{"steps": {<stepId>: {...}}}``) become the steps' control values.
Only triggers with ``bridgeUrl`` come here: the others keep the trigger route's hot path.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from herald.bridge.service import check_url, discover, to_external
from herald.events.schemas import TriggerEventRequest
from herald.events.service import UnknownWorkflow
from herald.kit.auth import Principal
from herald.kit.time import utcnow
from herald.workflows import external
from herald.workflows.repository import TriggerTarget, WorkflowRepository


def workflow_id(environment_id: str, bridge_url: str, identifier: str) -> str:
    """The id a stateless workflow's runs are recorded under: the same for every trigger of it.

    Runs of one workflow share it, so digests and throttles gather them as they
    gather a stored workflow's runs.
    """
    return hashlib.sha256(f"{environment_id}\n{bridge_url}\n{identifier}".encode()).hexdigest()[:24]


def step_controls(controls: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The trigger's ``controls.steps``, per stepId (what is not an object is left out)."""
    steps = (controls or {}).get("steps")
    if not isinstance(steps, dict):
        return {}
    return {str(step_id): values for step_id, values in steps.items() if isinstance(values, dict)}


async def synced_workflow_id(session: AsyncSession, principal: Principal, identifier: str) -> str | None:
    """The id of the environment's stored workflow of that ``workflowId``, if any: a stateless run is recorded
    under it, as Novu does, so that the subscribers' preferences for the workflow apply to it."""
    found = await WorkflowRepository(session).live_by_identifier(principal.environment_id, [identifier])
    workflow = found.get(identifier)
    return workflow.id if workflow is not None else None


async def target(
    principal: Principal,
    request: TriggerEventRequest,
    *,
    http: httpx.AsyncClient,
    secret_key: str,
    synced_id: str | None = None,
) -> TriggerTarget:
    """The workflow ``request.name`` as the trigger's bridge serves it; Novu's 422 when it serves no such workflow.

    ``synced_id``: the stored workflow of the same ``workflowId`` (:func:`synced_workflow_id`), whose id the
    run is recorded under; without one, an id made from the environment, the URL and the ``workflowId``.
    """
    assert request.bridgeUrl is not None
    bridge_url = check_url(request.bridgeUrl)
    found = await discover(http, bridge_url, secret_key)
    discovered = next((workflow for workflow in found if workflow.workflowId == request.name), None)
    if discovered is None:
        raise UnknownWorkflow(principal.environment_id, request.name)
    workflow = to_external(discovered)
    controls = step_controls(request.controls)
    steps = []
    for step in external.bridge_steps(workflow.steps):
        step["bridgeUrl"] = bridge_url
        if step["stepId"] in controls:
            step["controlValues"] = controls[step["stepId"]]
        steps.append(step)
    return TriggerTarget(
        id=synced_id or workflow_id(principal.environment_id, bridge_url, workflow.workflow_id),
        trigger_identifier=workflow.workflow_id,
        active=workflow.active,
        steps=steps,
        updated_at=utcnow(),
        # Not checked at trigger time, as for a synced workflow: the bridge checks the payload on every execute.
        payload_schema=None,
    )
