"""The webhook deliveries' own queue: jobs of kind ``webhook``, waiting by endpoint.

Deliveries wait apart from the workflow jobs (``ix_jobs_webhook_due``, not
``ix_jobs_due``): a worker's loop of workflow steps never reads past them, and
its webhook sender (herald/webhooks/sender.py) claims them here, a few of each
endpoint's at a time, oldest first within an endpoint. An endpoint is a range
of the index: the sender finds the endpoints that have deliveries waiting by
skipping from one endpoint to the next (:data:`_WAITING_ENDPOINTS`, one index
probe per endpoint, however many deliveries each holds), and passes over an
endpoint that is paused (its deliveries failing: herald/webhooks/delivery.py)
without reading a single one of its deliveries. So 18,000 deliveries queued for
one dead endpoint cost the others nothing, and cost that endpoint one attempt
per pause.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.queue import claim_statement, job_from_row
from herald.kit.time import utcnow
from herald.models import Job, WebhookEndpoint

# ix_jobs_webhook_due's predicate, written as the index's own (see engine/queue.py: a
# store reads a partial index only for a condition it can prove implies the index's).
WEBHOOK_DUE = "jobs.kind = 'webhook' AND jobs.status IN ('queued', 'delayed')"


@dataclass(frozen=True)
class WaitingEndpoint:
    """An endpoint with deliveries waiting: when its oldest is due, and its state."""

    endpoint_id: str
    due_at: datetime
    # False when the endpoint was deleted (its deliveries are canceled when claimed).
    present: bool
    disabled: bool
    failing_since: datetime | None
    paused_until: datetime | None


# One statement on both stores: a recursive walk from each endpoint with waiting
# deliveries to the next (the first entry of ix_jobs_webhook_due past it), the
# oldest due time of each (the first entry of its range), and its row.
_WAITING_ENDPOINTS = (
    text(
        f"""WITH RECURSIVE waiting(endpoint_id) AS (
        SELECT (SELECT jobs.endpoint_id FROM jobs WHERE {WEBHOOK_DUE} AND jobs.endpoint_id IS NOT NULL
                ORDER BY jobs.endpoint_id LIMIT 1)
        UNION ALL
        SELECT (SELECT jobs.endpoint_id FROM jobs WHERE {WEBHOOK_DUE} AND jobs.endpoint_id > waiting.endpoint_id
                ORDER BY jobs.endpoint_id LIMIT 1)
        FROM waiting WHERE waiting.endpoint_id IS NOT NULL
    )
    SELECT waiting.endpoint_id,
        (SELECT jobs.run_at FROM jobs WHERE {WEBHOOK_DUE} AND jobs.endpoint_id = waiting.endpoint_id
         ORDER BY jobs.run_at LIMIT 1) AS due_at,
        webhook_endpoints.id IS NOT NULL AS present,
        webhook_endpoints.disabled,
        webhook_endpoints.failing_since,
        webhook_endpoints.paused_until
    FROM waiting LEFT JOIN webhook_endpoints ON webhook_endpoints.id = waiting.endpoint_id
    WHERE waiting.endpoint_id IS NOT NULL"""
    )
    .columns(
        endpoint_id=Job.__table__.c.endpoint_id.type,
        due_at=Job.__table__.c.run_at.type,
        present=WebhookEndpoint.__table__.c.disabled.type,
        disabled=WebhookEndpoint.__table__.c.disabled.type,
        failing_since=WebhookEndpoint.__table__.c.failing_since.type,
        paused_until=WebhookEndpoint.__table__.c.paused_until.type,
    )
)


async def waiting_endpoints(session: AsyncSession) -> list[WaitingEndpoint]:
    """Every endpoint with deliveries waiting (due or not), in endpoint id order."""
    result = await session.execute(_WAITING_ENDPOINTS)
    endpoints = [
        WaitingEndpoint(
            endpoint_id=row.endpoint_id,
            due_at=row.due_at,
            present=bool(row.present),
            disabled=bool(row.disabled),
            failing_since=row.failing_since,
            paused_until=row.paused_until,
        )
        for row in result
    ]
    return sorted(endpoints, key=lambda endpoint: endpoint.endpoint_id)


_JOBS = Job.__table__
_CLAIM = claim_statement(text(WEBHOOK_DUE), _JOBS.c.endpoint_id == bindparam("endpoint"))


async def claim_deliveries(
    session: AsyncSession, endpoint_id: str, limit: int, worker_id: str, lease_seconds: float
) -> list[Job]:
    """Take up to ``limit`` of the endpoint's due deliveries, oldest first, leased for ``lease_seconds``.

    A range of ``ix_jobs_webhook_due``: as many entries read as are taken. On
    PostgreSQL other workers' rows are skipped (``SKIP LOCKED``).
    """
    now = utcnow()
    connection = await session.connection()
    result = await connection.execute(
        _CLAIM,
        {
            "endpoint": endpoint_id,
            "now": now,
            "limit": limit,
            "worker": worker_id,
            "until": now + timedelta(seconds=lease_seconds),
        },
    )
    return [job_from_row(row._asdict()) for row in result]


async def take_probe(session: AsyncSession, endpoint_id: str, hold_seconds: float) -> bool:
    """Whether this worker may try a paused endpoint again now, with one delivery.

    The endpoint's pause is moved ``hold_seconds`` on by the one worker that
    wins it (a conditional UPDATE of the endpoint's row), so however many
    workers look, one delivery goes; its outcome ends the pause or sets the
    next one. Should that worker die meanwhile, the next probe goes after the
    hold.
    """
    now = utcnow()
    endpoints = WebhookEndpoint.__table__
    result = await session.execute(
        update(endpoints)
        .where(
            endpoints.c.id == endpoint_id,
            endpoints.c.failing_since.is_not(None),
            endpoints.c.disabled.is_(False),
            (endpoints.c.paused_until.is_(None)) | (endpoints.c.paused_until <= now),
        )
        .values(paused_until=now + timedelta(seconds=hold_seconds))
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]
