"""Every change made through the API, in the audit log.

Each successful (2xx) POST, PUT, PATCH or DELETE on the API's routes is
recorded once the request's change has committed (the request session
commits before the answer is sent, herald.kit.db) and before the caller sees
the answer, so whoever reads the log after an answer finds its entry:

- the action from the route's template and method: ``POST /v1/subscribers``
  is ``subscriber.created``, ``PUT /v1/integrations/{integrationId}`` is
  ``integration.updated``, ``POST /v1/integrations/{integrationId}/set-primary``
  is ``integration.set_primary.created``;
- the resource id from the path (its last parameter) or the answer's
  ``data._id`` / ``data.id``;
- the actor: the request's API key and its environment;
- the changes: the request's JSON body, secrets masked (herald.audit.service.mask).

The per-event hot paths are left out: triggers (``/v1/events``), the
Inbox, the providers' and inbound webhooks, activity.track, the online state
and the seen/read/archived state of messages, and the routes that change
nothing (previews, diffs). A request with no API key (an inbox session) has
no actor to record.

It wraps the framework's stack, not the trigger route, which Herald answers
before it (herald.app.HeraldApp.__call__): a trigger pays nothing for it.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.audit.service import record
from herald.kit.db import session_scope
from herald.members.policy import ApiKeyActor

logger = logging.getLogger("herald.audit")

WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
API_PREFIXES = ("/v1/", "/v2/")
# Per-event paths (every trigger, every inbox click, every provider event): not changes a person made.
EXCLUDED_PREFIXES = ("/v1/events/", "/v1/inbox/", "/v2/inbound-webhooks/")
EXCLUDED_TEMPLATES = re.compile(
    r"(/messages/mark-as|/messages/mark-all|/messages/\{[^}]+\}/actions/\{[^}]+\}"
    r"|^/v2/subscribers/\{[^}]+\}/notifications|/online-status|/preview|/diff)$"
    r"|^/v2/subscribers/\{[^}]+\}/notifications/"
)
VERBS = {"POST": "created", "PUT": "updated", "PATCH": "updated", "DELETE": "deleted"}
# Bodies are kept for the entry up to this size; a larger one is recorded as truncated.
MAX_BODY = 64 * 1024


def resource_of(template: str) -> tuple[str, str]:
    """The resource type and the sub-resource (``""`` for none) a route's template names.

    ``/v1/topics/{topicKey}/subscribers`` -> (``topic``, ``subscribers``).
    """
    parts = [part for part in template.split("/")[2:] if part and not part.startswith("{")]
    if not parts:
        return "unknown", ""
    first = parts[0].replace("-", "_")
    resource = first[:-1] if first.endswith("s") and not first.endswith("ss") else first
    return resource, ".".join(part.replace("-", "_") for part in parts[1:])


def action_of(method: str, template: str) -> tuple[str, str]:
    """(action, resource type) of a change: ``("integration.set_primary.created", "integration")``."""
    resource, sub = resource_of(template)
    verb = VERBS.get(method, method.lower())
    return (f"{resource}.{sub}.{verb}" if sub else f"{resource}.{verb}"), resource


def _resource_id(scope: Scope, answer: bytes | None) -> str | None:
    params = scope.get("path_params") or {}
    if params:
        return str(list(params.values())[-1])
    if not answer:
        return None
    try:
        parsed = orjson.loads(answer)
    except orjson.JSONDecodeError:
        return None
    data = parsed.get("data") if isinstance(parsed, dict) else None
    if isinstance(data, dict):
        value = data.get("_id") or data.get("id")
        return str(value) if value is not None else None
    return None


def _changes(scope: Scope, body: bytes, truncated: bool) -> Any:
    if truncated:
        return {"truncated": True}
    if not body:
        return {}
    content_type = next((value for name, value in scope["headers"] if name == b"content-type"), b"")
    if b"json" not in content_type:
        return {"body": f"({len(body)} bytes of {content_type.decode('latin-1')[:60] or 'unknown type'})"}
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return {"body": "(not JSON)"}


class AuditMiddleware:
    def __init__(self, app: ASGIApp, sessionmaker: async_sessionmaker[AsyncSession]) -> None:
        self.app = app
        self.sessionmaker = sessionmaker

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] not in WRITES
            or not scope["path"].startswith(API_PREFIXES)
            or scope["path"].startswith(EXCLUDED_PREFIXES)
        ):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        truncated = False
        held: Message | None = None
        done = False

        async def keep_body() -> Message:
            nonlocal truncated
            message = await receive()
            if message["type"] == "http.request" and not truncated:
                chunk = message.get("body", b"")
                if len(body) + len(chunk) > MAX_BODY:
                    truncated = True
                    body.clear()
                else:
                    body.extend(chunk)
            return message

        async def record_then_send(message: Message) -> None:
            nonlocal held, done
            if message["type"] == "http.response.start" and 200 <= message["status"] < 300 and not done:
                held = message
                return
            if held is not None and message["type"] == "http.response.body":
                start, held, done = held, None, True
                answer = None if message.get("more_body") else message.get("body", b"")
                await self._record(scope, bytes(body), truncated, answer)
                await send(start)
            await send(message)

        await self.app(scope, keep_body, record_then_send)
        if held is not None:  # an answer that never sent its body
            await send(held)

    async def _record(self, scope: Scope, body: bytes, truncated: bool, answer: bytes | None) -> None:
        route = scope.get("route")
        template = getattr(route, "path_format", None) or getattr(route, "path", None)
        principal = (scope.get("state") or {}).get("principal")
        if template is None or principal is None or EXCLUDED_TEMPLATES.search(template):
            return
        action, resource_type = action_of(scope["method"], template)
        actor = ApiKeyActor(principal.environment_id, principal.organization_id, principal.api_key_id)
        try:
            async for session in session_scope(self.sessionmaker):
                record(
                    session,
                    actor,
                    action,
                    resource_type,
                    _resource_id(scope, answer),
                    environment_id=principal.environment_id,
                    changes=_changes(scope, body, truncated),
                )
        except Exception:  # the change itself is made and answered; say loudly that its entry is missing
            logger.error("could not record %s %s in the audit log", scope["method"], template, exc_info=True)
