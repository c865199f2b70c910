"""Sending webhook jobs (kind ``webhook``, written by herald/webhooks/events.py) to their endpoints.

Each attempt is one POST of the event's body, exactly as it was queued, with
the Standard Webhooks headers: ``webhook-id`` (the same on every attempt, so
the receiver can drop what it already has), ``webhook-timestamp`` (this
attempt's) and ``webhook-signature`` (v1, HMAC-SHA256 keyed by the endpoint's
secret, made by the ``standardwebhooks`` library). Any 2xx answer delivers
it. Delivery is at least once: a worker that dies mid-send loses its lease,
and the job is sent again by another.

A failed attempt (no answer, a timeout, any other status) is tried again,
the first retries within seconds (from HERALD_RETRY_BASE_SECONDS, doubling as
provider retries do), then hours apart (at most :data:`RETRY_CAP_SECONDS`),
for :data:`GIVE_UP_AFTER` from the first attempt. A failed attempt also
pauses its endpoint (:func:`pause_after_failure`): none of the endpoint's
deliveries is attempted until the pause ends, then one is (herald/webhooks/
queue.py, ``take_probe``); its success ends the pause, its failure sets the
next one. A dead endpoint with thousands of events queued costs one attempt a
pause, not one per event, and the other endpoints' deliveries go on meanwhile
(herald/webhooks/sender.py). An endpoint whose deliveries have failed for
:data:`GIVE_UP_AFTER` (or whose one event has) is disabled with the reason,
its waiting deliveries canceled: it is sent nothing more until it is made
again. A URL the outbound policy refuses fails at once and disables its
endpoint too: trying again cannot change the answer.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

import httpx
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from standardwebhooks.webhooks import Webhook

from herald.engine import queue
from herald.kit.crypto import SecretBox, scrub
from herald.kit.metrics import webhook_deliveries
from herald.kit.outbound import OutboundRefused
from herald.kit.time import isoformat, parse_iso, utcnow
from herald.models import Job
from herald.providers.base import ProviderError
from herald.providers.http import send_raw
from herald.webhooks.events import LISTENING
from herald.webhooks.repository import WebhookEndpointRepository

logger = logging.getLogger("herald.webhooks")

RETRY_CAP_SECONDS = 4 * 3600.0
GIVE_UP_AFTER = timedelta(hours=26)
# An endpoint is given this long to answer one attempt.
TIMEOUT_SECONDS = 15.0
# The longest an endpoint is paused after a failed attempt.
PAUSE_CAP_SECONDS = 300.0
# How long the worker that probes a paused endpoint holds the probe (queue.take_probe): longer than an
# attempt may take, so no other worker probes meanwhile.
PROBE_HOLD_SECONDS = 2 * TIMEOUT_SECONDS


def next_attempt_delay(attempts: int, base_seconds: float) -> float:
    return queue.retry_delay(attempts, base_seconds, cap_seconds=RETRY_CAP_SECONDS)


def pause_after_failure(failing_since: datetime | None, failed_at: datetime, base_seconds: float) -> float:
    """How long an endpoint is paused after a failed attempt: as long as it has been failing, within bounds.

    At least ``base_seconds`` (HERALD_RETRY_BASE_SECONDS), at most
    :data:`PAUSE_CAP_SECONDS`: the pauses about double while it stays down
    (each probe fails a pause later), so an endpoint down for an hour is tried
    about a dozen times in it, and one back after a short failure is tried
    again within seconds.
    """
    failing_for = (failed_at - failing_since).total_seconds() if failing_since is not None else 0.0
    return min(max(failing_for, base_seconds), PAUSE_CAP_SECONDS)


async def deliver(
    sessionmaker: async_sessionmaker[AsyncSession],
    http: httpx.AsyncClient,
    box: SecretBox,
    job: Job,
    worker_id: str,
    retry_base_seconds: float,
) -> None:
    data = dict(job.data or {})
    now = utcnow()
    first = parse_iso(data["firstAttemptAt"]) if data.get("firstAttemptAt") else now
    data["firstAttemptAt"] = isoformat(first)
    failing_since: datetime | None = None
    async with sessionmaker() as session:
        endpoint = await WebhookEndpointRepository(session, job.environment_id).get(str(data.get("endpointId")))
        if endpoint is None or endpoint.disabled:
            why = "the endpoint was deleted" if endpoint is None else f"the endpoint is disabled: {endpoint.disabled_reason}"
            url = secret = ""
        else:
            why, url, secret, failing_since = None, endpoint.url, endpoint.secret, endpoint.failing_since
        await session.rollback()
    if why is not None:
        webhook_deliveries.labels("canceled").inc()
        await _settle(sessionmaker, job, worker_id, status="canceled", data=data, error=why)
        return
    body = str(data.get("body") or "{}")
    webhook_id = str(data.get("webhookId") or job.event_id)
    signature = Webhook(box.open(secret)).sign(webhook_id, now, body)
    headers = {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": signature,
    }
    failure: str | None = None
    permanent = False
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS):
            response = await send_raw(http, "webhook", "POST", url, content=body.encode(), headers=headers)
        if not response.is_success:
            failure = f"the endpoint answered {response.status_code}"
    except ProviderError as exc:
        failure, permanent = str(exc).removeprefix("webhook: "), not exc.transient
    except (TimeoutError, OutboundRefused) as exc:
        failure, permanent = str(exc) or f"no answer within {TIMEOUT_SECONDS:g} s", isinstance(exc, OutboundRefused)
    data["lastAttemptAt"] = isoformat(now)
    if failure is None:
        data.pop("lastError", None)
        webhook_deliveries.labels("delivered").inc()
        await _settle(sessionmaker, job, worker_id, status="completed", data=data, endpoint_ok=True)
        return
    data["lastError"] = failure
    # The endpoint's URL may be its credential (a token in its path): never in the log.
    logged = scrub(failure, [url])
    failed_at = utcnow()
    # Out of time: this event failed for the whole period, or every delivery to its endpoint did
    # (a paused endpoint's events wait unattempted, so their own first attempts may be recent).
    since = min(first, failing_since) if failing_since is not None else first
    out_of_time = failed_at - since >= GIVE_UP_AFTER
    if permanent or out_of_time:
        reason = (
            f"deliveries failed since {isoformat(since)}; the last: {failure}" if out_of_time else f"deliveries cannot succeed: {failure}"
        )
        webhook_deliveries.labels("failed").inc()
        logger.error("webhook delivery failed for good", extra={"fields": {"environment": job.environment_id, "reason": logged}})
        await _settle(sessionmaker, job, worker_id, status="failed", data=data, error=failure, disable=reason)
        return
    webhook_deliveries.labels("retried").inc()
    logger.warning("webhook delivery failed, will retry", extra={"fields": {"environment": job.environment_id, "reason": logged}})
    delay = next_attempt_delay(job.attempts, retry_base_seconds)
    pause = pause_after_failure(failing_since, failed_at, retry_base_seconds)
    await _settle(
        sessionmaker,
        job,
        worker_id,
        status="queued",
        data=data,
        error=failure,
        run_at=failed_at + timedelta(seconds=delay),
        failing_at=now,
        paused_until=failed_at + timedelta(seconds=pause),
    )


async def _settle(
    sessionmaker: async_sessionmaker[AsyncSession],
    job: Job,
    worker_id: str,
    *,
    status: str,
    data: dict,
    error: str | None = None,
    run_at: datetime | None = None,
    endpoint_ok: bool = False,
    failing_at: datetime | None = None,
    paused_until: datetime | None = None,
    disable: str | None = None,
) -> None:
    """Write the attempt's outcome, if this worker still holds the job; the endpoint's health with it."""
    values: dict = {"status": status, "data": data, "error_text": error, "locked_until": None, "updated_at": utcnow()}
    if run_at is not None:
        values["run_at"] = run_at
    async with sessionmaker() as session, session.begin():
        result = await session.execute(
            update(Job).where(Job.id == job.id, Job.locked_by == worker_id, Job.status == "running").values(**values)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            logger.info("webhook job %s was taken over by another worker", job.id)
            return
        endpoints = WebhookEndpointRepository(session, job.environment_id)
        endpoint_id = str(data.get("endpointId"))
        if endpoint_ok:
            await endpoints.record_success(endpoint_id)
        if failing_at is not None or disable is not None:
            await endpoints.record_failure(endpoint_id, failing_at or utcnow(), paused_until or utcnow())
        if disable is not None:
            await endpoints.disable(endpoint_id, utcnow(), disable)
            canceled = await endpoints.cancel_deliveries(endpoint_id, f"the endpoint is disabled: {disable}")
            LISTENING.forget(job.environment_id)
            logger.warning("webhook endpoint %s disabled (%d deliveries canceled): %s", endpoint_id, canceled, disable)
