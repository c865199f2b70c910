"""Steps of code-first workflows: their content comes from the team's bridge, not from a template.

A step synced from a bridge (``bridge: true`` on the stored step, herald/workflows/external.py)
is executed on the bridge when its job runs: ``POST <bridge>?action=execute&workflowId=&stepId=``
with ``{payload, subscriber, state, controls}``, signed with the environment's API key
(herald/bridge/client.py). What comes back decides the step, as in Novu's worker:

- ``options.skip``: the step is canceled, with an execution detail that says so (its filters
  and the subscriber's preferences are not looked at);
- a 4xx (an invalid payload, a step the code no longer has): the step fails with the
  framework's message, and is not retried (the same request gets the same answer);
- a 5xx or no answer: the step fails as a transient failure, retried with backoff;
- otherwise the outputs are the message of a channel step (``BridgeOutputs``), the settings of a
  digest or delay step, and the result of a custom step, which later steps read.

``state`` tells the bridge what became of the earlier steps, as Novu's worker builds it: a
digest's events (job id, time, payload), a delay's duration, an in-app message's seen and
read flags, a custom step's outputs, ``{}`` for the rest.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from herald.bridge import client
from herald.bridge.client import BridgeError
from herald.bridge.repository import BridgeRepository
from herald.engine.repository import EngineRepository
from herald.engine.steps.base import Detail, StepContext, StepOutcome, subscriber_variables
from herald.kit.outbound import OutboundRefused
from herald.kit.time import isoformat, utcnow
from herald.models import Job, Message

# The step kinds whose outputs are settings of Herald's own step (run when the job is created in Novu).
SETTINGS_STEPS = frozenset({"digest", "delay"})


@dataclass(frozen=True)
class BridgeOutputs:
    """What the bridge answered for a step: its outputs, by the framework's names."""

    outputs: dict[str, Any]

    def text(self, key: str) -> str | None:
        value = self.outputs.get(key)
        return value if isinstance(value, str) else None

    def in_app(self) -> dict[str, Any]:
        """The in-app message's fields: body, subject, avatar, actions and redirect as the Inbox reads them."""
        buttons = []
        for kind in ("primary", "secondary"):
            action = self.outputs.get(f"{kind}Action")
            if isinstance(action, dict) and isinstance(action.get("label"), str):
                button: dict[str, Any] = {"type": kind, "content": action["label"]}
                redirect = action.get("redirect") if isinstance(action.get("redirect"), dict) else {}
                if isinstance(redirect.get("url"), str):
                    button["url"] = redirect["url"]
                    if isinstance(redirect.get("target"), str):
                        button["target"] = redirect["target"]
                buttons.append(button)
        cta: dict[str, Any] = {}
        redirect = self.outputs.get("redirect")
        if isinstance(redirect, dict) and isinstance(redirect.get("url"), str):
            cta = {"type": "redirect", "data": {"url": redirect["url"]}}
            if isinstance(redirect.get("target"), str):
                cta["data"]["target"] = redirect["target"]
        if buttons:
            cta = {"type": "redirect", "data": cta.get("data", {}), "action": {"buttons": buttons}}
        data = self.outputs.get("data")
        return {
            "content": self.text("body") or "",
            "subject": self.text("subject"),
            "avatar": self.text("avatar"),
            "cta": cta,
            "data": data if isinstance(data, dict) else None,
        }

    def email_html(self) -> str:
        """The email's HTML as the bridge made it, with its preheader (hidden) first when it gave one."""
        body = self.text("body") or ""
        preheader = self.text("preheader")
        if not preheader:
            return body
        hidden = f'<div style="display:none;max-height:0;overflow:hidden">{html.escape(preheader)}</div>'
        return hidden + body


def is_bridged(ctx: StepContext) -> bool:
    return bool(ctx.step.get("bridge"))


async def _target(ctx: StepContext) -> tuple[str | None, str | None]:
    """The bridge URL (the trigger's own, else the environment's last sync) and the signing key, opened."""
    async with ctx.sessionmaker() as session:
        repository = BridgeRepository(session)
        url = ctx.step.get("bridgeUrl") or await repository.bridge_url(ctx.job.environment_id)
        sealed = await repository.sealed_signing_key(ctx.job.environment_id)
    return url, ctx.box.open(sealed) if sealed else None


def _entry(step_id: str, job: Job, outputs: dict[str, Any]) -> dict[str, Any]:
    return {"stepId": step_id, "outputs": outputs, "state": {"status": job.status, "error": job.error_text}}


async def build_state(ctx: StepContext) -> list[dict[str, Any]]:
    """What became of the earlier steps of this run, one entry per step, as Novu's worker sends it."""
    if not ctx.job.notification_id:
        return []
    steps = [step for step in ctx.event.steps or [] if step.get("active", True)]
    async with ctx.sessionmaker() as session:
        repository = EngineRepository(session)
        jobs = await repository.earlier_step_jobs(ctx.job.notification_id, ctx.job.step_index or 0)
        in_app = await repository.in_app_states([job.id for job in jobs if job.step_type == "in_app"])
        digests = {
            job.id: await repository.digest_events(job.id)
            for job in jobs
            if job.step_type == "digest" and job.status != "merged"
        }
    now = utcnow()
    state = []
    for job in jobs:
        index = job.step_index or 0
        step = steps[index] if index < len(steps) else {}
        step_id = str(step.get("stepId") or job.step_id or index)
        if job.step_type == "digest":
            events = [
                {"id": job_id, "time": isoformat(at), "payload": payload}
                for job_id, at, payload in digests.get(job.id, [])
            ]
            state.append(_entry(step_id, job, {"events": events, "eventCount": len(events)}))
        elif job.step_type == "delay":
            state.append(_entry(step_id, job, {"duration": int((now - job.created_at).total_seconds() * 1000)}))
        elif job.step_type == "custom":
            state.append(_entry(step_id, job, dict(job.result or {})))
        elif job.step_type == "in_app":
            state.append(_entry(step_id, job, _in_app_state(in_app.get(job.id))))
        else:
            state.append(_entry(step_id, job, {}))
    return state


def _in_app_state(message: Message | None) -> dict[str, Any]:
    if message is None:
        return {"seen": False, "read": False, "lastSeenDate": None, "lastReadDate": None}
    return {
        "seen": message.seen,
        "read": message.read,
        "lastSeenDate": isoformat(message.last_seen_date),
        "lastReadDate": isoformat(message.last_read_date),
    }


def _subscriber(ctx: StepContext) -> dict[str, Any]:
    """The subscriber as the framework's ``subscriber`` reads it (unset fields left out)."""
    fields = subscriber_variables(ctx.subscriber)
    fields.pop("channels", None)
    return {key: value for key, value in fields.items() if value is not None}


def event_body(
    payload: dict[str, Any], subscriber: dict[str, Any], state: list[dict[str, Any]], controls: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The execute request's body, in the order Novu's worker writes it.

    ``controls``: the step's saved control values (``PUT /v1/bridge/controls/...``, or a stateless
    trigger's ``controls.steps``), ``{}`` without any: the framework applies its schema's defaults.
    """
    return {"payload": payload, "controls": controls or {}, "state": state, "subscriber": subscriber}


async def execute(ctx: StepContext) -> StepOutcome | None:
    """Ask the bridge for this step; an outcome ends the step here, None lets it run with what came back.

    On None, a channel step has ``ctx.bridge_outputs``; a digest or delay
    step has its settings in ``ctx.step["metadata"]``.
    """
    step_type = ctx.job.step_type or ""
    if step_type in SETTINGS_STEPS and ((ctx.job.data or {}).get("wait_until") or (ctx.job.data or {}).get("digest_open")):
        # Resumed after its wait: its settings were taken when it began.
        ctx.step = {**ctx.step, "metadata": (ctx.job.data or {}).get("bridge_metadata") or {}}
        return None
    url, key = await _target(ctx)
    if not url:
        return StepOutcome.failed("The workflow is written in code and the environment has no bridge URL: run `novu sync`")
    if not key:
        return StepOutcome.failed("The environment has no API key to sign bridge requests with")
    controls = ctx.step.get("controlValues") if isinstance(ctx.step.get("controlValues"), dict) else None
    body = event_body(ctx.payload, _subscriber(ctx), await build_state(ctx), controls)
    workflow_id = ctx.event.trigger_identifier
    step_id = str(ctx.step.get("stepId") or "")
    try:
        answer = await client.call(
            ctx.http, url, "execute", secret_key=key, body=body, workflow_id=workflow_id, step_id=step_id
        )
    except OutboundRefused as exc:
        return StepOutcome.failed(f"Bridge request refused: {exc}")
    except BridgeError as exc:
        return _failed(exc)
    options = answer.body.get("options") if isinstance(answer.body.get("options"), dict) else {}
    if options.get("skip") is True:
        return StepOutcome(
            "canceled", details=[Detail("Success", f"Step {step_id} skipped by the workflow's code (options.skip)")]
        )
    outputs = answer.body.get("outputs") if isinstance(answer.body.get("outputs"), dict) else {}
    if step_type in SETTINGS_STEPS:
        if "cron" in outputs:
            return StepOutcome.failed(f"The {step_type} step {step_id} asks for a cron schedule, which Herald does not run; use amount and unit")
        metadata = settings_of(step_type, outputs)
        ctx.step = {**ctx.step, "metadata": metadata}
        ctx.bridge_metadata = metadata
        return None
    ctx.bridge_outputs = BridgeOutputs(outputs)
    return None


def _failed(exc: BridgeError) -> StepOutcome:
    where = f" ({exc.status}{' ' + exc.code if exc.code else ''})" if exc.status else ""
    text = f"Bridge error{where}: {exc.message}{_problems(exc.data)}"
    details = [Detail("Failed", text + (" (will retry)" if exc.transient else ""), raw=_raw(exc))]
    return StepOutcome("failed", details=details, error_text=text, retryable=exc.transient)


def _problems(data: Any) -> str:
    """The framework's list of problems (``[{path, message}]``, as for an invalid payload), said in the text."""
    if not isinstance(data, list):
        return ""
    said = [
        f"{item.get('path') or '(payload)'} {item.get('message')}".strip()
        for item in data[:10]
        if isinstance(item, dict) and isinstance(item.get("message"), str)
    ]
    return f" ({'; '.join(said)})" if said else ""


def _raw(exc: BridgeError) -> dict[str, Any] | None:
    if exc.status is None:
        return None
    raw: dict[str, Any] = {"status": exc.status, "message": exc.message}
    if exc.code:
        raw["code"] = exc.code
    if exc.data is not None:
        raw["data"] = exc.data
    return raw


def settings_of(step_type: str, outputs: dict[str, Any]) -> dict[str, Any]:
    """A digest's or delay's outputs as the settings of Herald's own step (its ``metadata``)."""
    settings: dict[str, Any] = {"type": "regular", "amount": outputs.get("amount"), "unit": outputs.get("unit")}
    if step_type == "digest":
        if isinstance(outputs.get("digestKey"), str):
            settings["digestKey"] = outputs["digestKey"]
        look_back = outputs.get("lookBackWindow")
        if isinstance(look_back, dict):
            settings["type"] = "backoff"
            settings["backoffAmount"] = look_back.get("amount")
            settings["backoffUnit"] = look_back.get("unit")
    return settings
