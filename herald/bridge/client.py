"""Requests to a bridge: the endpoint where a team serves its code-first workflows with Novu's framework.

Every request is signed as the framework checks it in strict mode:
``novu-signature: t=<unix ms>,v1=<hex HMAC-SHA256 of "<t>.<body>">`` keyed by
the environment's API key, where ``<body>`` is the JSON the framework gets back
when it serializes the body it parsed (``JSON.stringify``), and ``{}`` for a GET.
So the body is sent exactly as :func:`js_json` writes it, and the signature is
made of those same bytes. Each request (and each retry) is signed afresh: the
framework refuses a signature older than five minutes.

Every request goes through the outbound policy (the client is one made by
``create_http_client``), is bounded in time (:data:`BRIDGE_TIMEOUT`) and in what
is read of its answer (``read_streamed``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx

from herald.kit.outbound import OutboundPolicy, OutboundRefused
from herald.providers.answers import answer_is_cut, read_streamed
from herald.providers.http import create_http_client

# Novu's API waits five seconds for a bridge.
BRIDGE_TIMEOUT = 5.0
# A bridge's answer that says nothing more than its status is cut to this much in an error text.
_EXCERPT = 300
# Statuses worth asking again (besides every 5xx): the rest are the bridge's word on the request.
TRANSIENT_STATUSES = frozenset({408, 429})
_ARRAY_INDEX_LIMIT = 2**32 - 1


class BridgeError(Exception):
    """A bridge request that did not succeed: the bridge's own message and code when it answered one.

    ``transient``: a network failure or a status worth retrying (the bridge
    may answer next time); otherwise the bridge refused the request (an
    invalid payload, an unknown step) and asking again changes nothing.
    """

    def __init__(
        self, message: str, *, status: int | None = None, code: str | None = None, data: Any = None, transient: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.data = data
        self.transient = transient


@dataclass(frozen=True)
class BridgeAnswer:
    status: int
    body: dict[str, Any] = field(default_factory=dict)


def process_client(state: Any) -> httpx.AsyncClient:
    """The API process's client for bridges (``app.state``'s), through the outbound policy; made on first use."""
    http = getattr(state, "bridge_http", None)
    if http is None:
        policy = OutboundPolicy.allowing(state.settings.outbound_allow)
        http = state.bridge_http = create_http_client(outbound=policy, timeout=BRIDGE_TIMEOUT)
    return http


def _js_value(value: Any) -> Any:
    """``value`` as JavaScript holds it after ``JSON.parse``: integral floats are integers, and the
    keys of an object that read as array indexes come first, in numeric order (JS's own key order)."""
    if isinstance(value, dict):
        indexes = sorted((key for key in value if _is_array_index(key)), key=int)
        rest = [key for key in value if not _is_array_index(key)]
        return {key: _js_value(value[key]) for key in (*indexes, *rest)}
    if isinstance(value, (list, tuple)):
        return [_js_value(item) for item in value]
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value


def _is_array_index(key: Any) -> bool:
    return isinstance(key, str) and key.isdigit() and str(int(key)) == key and int(key) < _ARRAY_INDEX_LIMIT


def js_json(body: Any) -> str:
    """``JSON.stringify(body)`` as the framework re-serializes a parsed body: compact, non-ASCII left as is."""
    return json.dumps(_js_value(body), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def signature(secret_key: str, body_text: str, timestamp_ms: int | None = None) -> str:
    """The ``novu-signature`` header's value for ``body_text`` (the exact JSON sent, ``{}`` for a GET)."""
    t = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    digest = hmac.new(secret_key.encode(), f"{t}.{body_text}".encode(), hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def action_url(bridge_url: str, action: str, **params: str | None) -> str:
    """``bridge_url`` with ``?action=`` and the other parameters given, keeping a query of its own."""
    parts = urlsplit(bridge_url)
    query = urlencode({"action": action, **{key: value for key, value in params.items() if value is not None}})
    return urlunsplit((parts.scheme, parts.netloc, parts.path, f"{parts.query}&{query}" if parts.query else query, ""))


async def call(
    http: httpx.AsyncClient,
    bridge_url: str,
    action: str,
    *,
    secret_key: str,
    body: dict[str, Any] | None = None,
    workflow_id: str | None = None,
    step_id: str | None = None,
    timeout: float = BRIDGE_TIMEOUT,
) -> BridgeAnswer:
    """One signed request to the bridge: a POST of ``body`` (execute, preview), else a GET.

    Answers the bridge's JSON on a 2xx; raises :class:`BridgeError` otherwise,
    with the framework's ``message`` and ``code`` when it sent them, and
    ``OutboundRefused`` when the policy refuses the bridge's address.
    """
    text = js_json(body) if body is not None else "{}"
    headers = {
        "content-type": "application/json",
        "novu-signature": signature(secret_key, text),
        "bypass-tunnel-reminder": "true",
    }
    # The API sends the signature under both names; the framework reads novu-signature.
    headers["x-novu-signature"] = headers["novu-signature"]
    url = action_url(bridge_url, action, workflowId=workflow_id, stepId=step_id)
    method = "POST" if body is not None else "GET"
    request = http.build_request(
        method, url, content=text.encode() if body is not None else None, headers=headers, timeout=httpx.Timeout(timeout)
    )
    try:
        response = await read_streamed(await http.send(request, stream=True))
    except OutboundRefused:
        raise
    except httpx.TimeoutException:
        raise BridgeError(f"The bridge did not answer within {timeout:g} s", transient=True) from None
    except httpx.HTTPError as exc:
        raise BridgeError(f"The bridge could not be reached: {type(exc).__name__} {exc}".strip(), transient=True) from None
    try:
        answer = response.json() if not answer_is_cut(response) else None
    except ValueError:
        answer = None
    if response.is_success:
        if not isinstance(answer, dict):
            raise BridgeError(
                f"The bridge answered {response.status_code} with no JSON object", status=response.status_code
            )
        return BridgeAnswer(response.status_code, answer)
    transient = response.status_code >= 500 or response.status_code in TRANSIENT_STATUSES
    if isinstance(answer, dict) and isinstance(answer.get("message"), str):
        code = answer.get("code") if isinstance(answer.get("code"), str) else None
        raise BridgeError(
            answer["message"], status=response.status_code, code=code, data=answer.get("data"), transient=transient
        )
    excerpt = response.text[:_EXCERPT] if not answer_is_cut(response) else ""
    raise BridgeError(
        f"The bridge answered {response.status_code}" + (f": {excerpt}" if excerpt.strip() else ""),
        status=response.status_code,
        transient=transient,
    )
