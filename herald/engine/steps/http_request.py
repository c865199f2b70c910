"""The HTTP request step (Novu's ``http_request``): call an address of the workflow's author, mid-workflow.

Its controls, as @novu/api's ``HttpRequestControlDto`` names them: ``method``
(GET, POST, PUT, DELETE, PATCH), ``url``, ``headers`` (``[{key, value}]``),
``body`` (a JSON string, or ``[{key, value}]`` as older workflows have it),
``responseBodySchema`` with ``enforceSchemaValidation``, and
``continueOnFailure``. The url, the header values and the body are templates
(``{{payload.orderId}}``, ``{{subscriber.email}}``), rendered with the same
bounded renderer as messages.

The request goes through the providers' shared client, so through the
outbound policy (herald/kit/outbound.py: no loopback, private or metadata
address unless ``HERALD_OUTBOUND_ALLOW`` lets it through), is bounded in time
(:data:`TIMEOUT_SECONDS`) and reads at most ``MAX_ANSWER_BYTES`` of the
answer (herald/providers/answers.py). A 2xx answer completes the step; its
status, headers and body (JSON when it parses) are the step's result. A 5xx,
a 429, a timeout or a connection that failed is tried again as other
transient failures are; any other answer, a refused address or a body off the
``responseBodySchema`` fails the step and stops the workflow (the steps after
it are canceled), unless ``continueOnFailure`` is true: then it completes with
a warning (or, after its last try, fails) and the workflow goes on. Each try is an
execution detail with the method, the address (without its query) and the
answer's status and first bytes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

from jsonschema import SchemaError
from jsonschema.validators import validator_for

from herald.engine.steps.base import Detail, StepContext, StepOutcome
from herald.engine.templates import TemplateError, render_bounded, render_text
from herald.providers.base import ProviderError
from herald.providers.http import send_raw

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")
TIMEOUT_SECONDS = 30.0
MAX_URL = 2048
MAX_HEADERS = 50
MAX_HEADER_VALUE = 8192
MAX_BODY = 256 * 1024
# Of the answer's body, this much is kept in the execution detail (the whole, up to the read limit, in the result).
DETAIL_EXCERPT = 2000
MAX_RESULT_BODY = 64 * 1024
# Headers Herald sets itself: a step cannot change how the request is framed.
RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
PROVIDER_ID = "http_request"


def check_controls(controls: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """What is wrong with the step's controls, as (control, why, value); checked when the workflow is saved."""
    problems: list[tuple[str, str, Any]] = []
    method = controls.get("method", "GET")
    if method not in METHODS:
        problems.append(("method", f"must be one of {', '.join(METHODS)}", method))
    url = controls.get("url")
    if not isinstance(url, str) or not url.strip():
        problems.append(("url", "an http_request step needs the url to call", url))
    elif len(url) > MAX_URL:
        problems.append(("url", f"must be at most {MAX_URL} characters", len(url)))
    headers = controls.get("headers", [])
    if not isinstance(headers, list) or len(headers) > MAX_HEADERS:
        problems.append(("headers", f"must be a list of at most {MAX_HEADERS} {{key, value}} pairs", None))
    else:
        for index, pair in enumerate(headers):
            if not _is_pair(pair) or len(pair["value"]) > MAX_HEADER_VALUE:
                problems.append((f"headers.{index}", "must be {key, value}, both text", pair))
    body = controls.get("body")
    if body is not None and not isinstance(body, str) and not (isinstance(body, list) and all(map(_is_pair, body))):
        problems.append(("body", "must be a JSON string or a list of {key, value} pairs", None))
    elif isinstance(body, str) and len(body) > MAX_BODY:
        problems.append(("body", f"must be at most {MAX_BODY // 1024} KB", len(body)))
    schema = controls.get("responseBodySchema")
    if schema is not None:
        try:
            validator_for(schema).check_schema(schema)
        except (SchemaError, TypeError, AttributeError) as exc:
            problems.append(("responseBodySchema", f"is not a JSON schema: {getattr(exc, 'message', exc)}", None))
    return problems


def _is_pair(pair: Any) -> bool:
    return isinstance(pair, dict) and isinstance(pair.get("key"), str) and isinstance(pair.get("value"), str)


def _where(url: str) -> str:
    """The address as details show it: scheme, host and path, without the query (it may carry a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}{parts.path}"


async def _render(source: str, variables: dict[str, Any]) -> str:
    return await render_bounded(render_text, source, variables)


async def _request(ctx: StepContext, controls: dict[str, Any]) -> tuple[str, str, dict[str, str], bytes | None]:
    variables = ctx.variables()
    method = str(controls.get("method") or "GET")
    url = (await _render(str(controls.get("url") or ""), variables)).strip()
    headers: dict[str, str] = {}
    for pair in controls.get("headers") or []:
        name = pair["key"].strip()
        if name and name.lower() not in RESERVED_HEADERS:
            headers[name] = (await _render(pair["value"], variables)).replace("\r", " ").replace("\n", " ")
    body = controls.get("body")
    content: bytes | None = None
    if isinstance(body, list) and body:
        content = json.dumps({pair["key"]: await _render(pair["value"], variables) for pair in body}).encode()
    elif isinstance(body, str) and body.strip():
        content = (await _render(body, variables)).encode()
    if content is not None and method != "GET":
        headers.setdefault("Content-Type", "application/json")
    return method, url, headers, (content if method != "GET" else None)


def _answer_body(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text[:MAX_RESULT_BODY]


def _failure(controls: dict[str, Any], detail: str, raw: dict[str, Any] | None, *, retryable: bool) -> StepOutcome:
    if controls.get("continueOnFailure") is True and not retryable:
        return StepOutcome(
            "completed",
            details=[Detail("Warning", f"{detail}; continuing (continueOnFailure)", PROVIDER_ID, raw)],
            result={"ok": False, "error": detail},
        )
    # A failure stops the workflow (its later steps are canceled) unless continueOnFailure, as in Novu.
    return StepOutcome(
        "failed",
        details=[Detail("Failed", detail, PROVIDER_ID, raw)],
        error_text=detail,
        retryable=retryable,
        halt=controls.get("continueOnFailure") is not True,
    )


async def run(ctx: StepContext) -> StepOutcome:
    controls = dict(ctx.step.get("controlValues") or {})
    problems = check_controls(controls)
    if problems:
        return StepOutcome.failed("; ".join(f"{name} {why}" for name, why, _ in problems))
    try:
        method, url, headers, content = await _request(ctx, controls)
    except TemplateError as exc:
        return StepOutcome.failed(f"The request could not be made: {exc.message}")
    if urlsplit(url).scheme not in ("http", "https"):
        return _failure(controls, f"The url must be http or https, not {url[:80]!r}", None, retryable=False)
    where = f"{method} {_where(url)}"
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            response = await send_raw(ctx.http, PROVIDER_ID, method, url, headers=headers, content=content)
    except TimeoutError:
        return _failure(controls, f"{where}: no answer within {TIMEOUT_SECONDS:g} s", None, retryable=True)
    except ProviderError as exc:
        # Refused by the outbound policy, an invalid address, or no answer (transient: tried again).
        return _failure(controls, f"{where}: {exc}", None, retryable=exc.transient)
    text = response.text
    raw = {"statusCode": response.status_code, "body": text[:DETAIL_EXCERPT]}
    if not response.is_success:
        transient = response.status_code >= 500 or response.status_code == 429
        return _failure(controls, f"{where} answered {response.status_code}", raw, retryable=transient)
    body = _answer_body(text)
    schema = controls.get("responseBodySchema")
    if schema and controls.get("enforceSchemaValidation"):
        errors = sorted(validator_for(schema)(schema).iter_errors(body), key=lambda error: list(error.path))
        if errors:
            first = errors[0]
            at = "/".join(str(part) for part in first.path) or "(the body)"
            return _failure(
                controls,
                f"{where}: the answer is off responseBodySchema at {at}: {first.message}",
                raw,
                retryable=False,
            )
    result = {"statusCode": response.status_code, "headers": dict(response.headers), "body": body}
    return StepOutcome(
        "completed",
        details=[Detail("Success", f"{where} answered {response.status_code}", PROVIDER_ID, raw)],
        result=result,
    )
