from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.queue import BUSY, WAKE_CHANNEL, mark_jobs_written, wake_workers
from herald.engine.repository import EngineRepository, detail_row
from herald.kit import tracing
from herald.kit.bulk import insert_rows, postgres_document, postgres_insert, postgres_insert_select, postgres_recordset
from herald.kit.db import fetch_outside_transaction
from herald.kit.ids import new_id
from herald.kit.time import isoformat, utcnow
from herald.models import Event, Job
from herald.workflows.repository import TriggerTarget

# What the events-and-jobs statement answers, besides event ids, when a workflow it was to check had changed.
_CHANGED = ""


class WorkflowsChanged(Exception):
    """A workflow the batch took from the process's kept ones had changed: nothing was written."""


def event_job(event: dict[str, Any], job_id: str) -> dict[str, Any]:
    """The job that expands ``event`` (``EngineRepository`` claims it), as SQLite's write makes it.

    PostgreSQL's makes the same row in its statement (_EVENT_JOB): the
    repository's tests compare the two with every column of the table.
    """
    return {
        "id": job_id,
        "environment_id": event["environment_id"],
        "organization_id": event["organization_id"],
        "kind": "event",
        "status": "queued",
        "event_id": event["id"],
        "transaction_id": event["transaction_id"],
        "workflow_id": event["workflow_id"],
        "run_at": event["created_at"],
        "created_at": event["created_at"],
        "updated_at": event["created_at"],
        # The trigger's trace while traces are on (kit/tracing.py): the worker that expands the event continues it.
        "trace_context": event.get("trace_context"),
    }


# event_job in SQL, over the events' records (``r``); the job's id is the record's ``job_id``.
_EVENT_JOB = {
    "id": 'r."job_id"',
    "environment_id": 'r."environment_id"',
    "organization_id": 'r."organization_id"',
    "kind": "'event'",
    "status": "'queued'",
    "event_id": 'r."id"',
    "transaction_id": 'r."transaction_id"',
    "workflow_id": 'r."workflow_id"',
    "run_at": 'r."created_at"',
    "created_at": 'r."created_at"',
    "updated_at": 'r."created_at"',
}
# The fields of the events' records _EVENT_JOB reads, besides job_id.
_EVENT_JOB_READS = ("id", "environment_id", "organization_id", "transaction_id", "workflow_id", "created_at")
# While traces are on the records also carry the trigger's trace (kit/tracing.py), for its job.
_TRACED_EVENT_JOB = {**_EVENT_JOB, "trace_context": 'r."trace_context"'}
# An event's steps: those of its record when sent, else its workflow's (one the statement checks unchanged).
_STEPS = {"steps": 'COALESCE(r."workflow_steps"::jsonb, w."steps")'}


@cache
def _events_and_jobs_statement(traced: bool = False) -> str:
    """Events, the jobs of those written, and a wake-up for the workers when there are any (PostgreSQL).

    One document ($1) carries the events, each with the id of its job: the
    jobs are made in the statement from the events written (_EVENT_JOB). The
    events of a workflow the statement checks (below) leave its steps out, and
    they are copied from the workflow's row. Under a burst every workflow is
    one kept, and the document, which was two of about 1.5 kB a trigger, is
    one of 0.6 kB: less to build, to send and to parse.

    The wake-up's payload is the second parameter: BUSY from a batch that many
    callers wait on (``EventRepository.record_many``), empty otherwise. The
    third lists workflows (id, updated_at) that must be unchanged and not
    deleted: when one is not, nothing is written and the answer holds _CHANGED.
    ``traced``: the records carry ``trace_context`` for the jobs (traces on).
    """
    changed = (
        "SELECT 1 FROM json_to_recordset($3::json) AS c(id varchar, updated_at timestamptz) "
        "WHERE NOT EXISTS (SELECT 1 FROM workflows w WHERE w.id = c.id AND w.updated_at = c.updated_at AND NOT w.deleted)"
    )
    events = postgres_insert(
        Event.__table__,
        parameter=1,
        given=_STEPS,
        extra={"workflow_steps": "json"},
        joins=' LEFT JOIN workflows w ON w.id = r."workflow_id"',
        skip_conflicts_on=("environment_id", "transaction_id"),
        returning=("id",),
        where="NOT EXISTS (SELECT 1 FROM changed)",
    )
    carried = {"job_id": "varchar(24)", "trace_context": "varchar(64)"} if traced else {"job_id": "varchar(24)"}
    record = postgres_recordset(Event.__table__, 1, _EVENT_JOB_READS, carried)
    jobs = postgres_insert_select(Job.__table__, _TRACED_EVENT_JOB if traced else _EVENT_JOB, f'{record} WHERE r."id" IN (SELECT id FROM written)', returning=("id",))
    # pg_notify is delivered when the statement's transaction commits, like NOTIFY.
    return (
        f"WITH changed AS ({changed}), written AS ({events}), queued AS ({jobs}), "
        f"woken AS (SELECT pg_notify('{WAKE_CHANNEL}', $2) WHERE EXISTS (SELECT 1 FROM queued)) "
        f"SELECT id FROM written UNION ALL SELECT NULL FROM woken UNION ALL (SELECT '{_CHANGED}' FROM changed LIMIT 1)"
    )


class EventRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def record_many(
        self,
        events: Sequence[dict[str, Any]],
        *,
        busy: bool = False,
        unchanged: Iterable[TriggerTarget] = (),
    ) -> set[str]:
        """Write events and the jobs that will expand them (``event_job``); returns the ids of the events written.

        An event whose transactionId is already used in its environment (or
        earlier in ``events``) is skipped by the unique index, not by a read, so
        two racing requests cannot both get through; its job is not written.
        ``busy``: many callers wait on this write; on PostgreSQL the workers'
        wake-up says so (queue.BUSY) and they give way to the API for a moment.
        (On SQLite the worker shares the API's process and counts its requests.)
        ``unchanged``: workflows the batch was judged on without reading them
        (events/targets.py); PostgreSQL only. When one has changed, nothing is
        written and WorkflowsChanged is raised. They are checked also when no
        event is to be written: a trigger refused on a kept workflow (inactive,
        say) must not be refused on a workflow that has changed since.
        """
        unchanged = list(unchanged)
        if self.session.bind.dialect.name == "postgresql":
            if not events and not unchanged:
                return set()
            return await self._record_many_in_one_statement(events, busy, unchanged)
        if not events:
            return set()
        # The trigger path's writes: rows handed to the driver as it takes them (kit/bulk.py).
        written = {
            row[0]
            for row in await insert_rows(
                self.session,
                Event.__table__,
                events,
                skip_conflicts_on=("environment_id", "transaction_id"),
                returning=("id",),
            )
        }
        jobs = [event_job(event, new_id()) for event in events if event["id"] in written]
        if jobs:
            await insert_rows(self.session, Job.__table__, jobs)
            await wake_workers(self.session)
        return written

    async def _record_many_in_one_statement(
        self, events: Sequence[dict[str, Any]], busy: bool, unchanged: list[TriggerTarget]
    ) -> set[str]:
        """PostgreSQL: the events, their jobs and the workers' wake-up in one statement, one round trip.

        The jobs insert keeps the jobs of the events written (a repeated
        transactionId writes neither). One statement is atomic on its own, so
        the trigger batch can run it outside a transaction
        (:func:`herald.events.service.record_trigger_batch`): with the batch's
        read, two round trips where BEGIN, three writes and COMMIT took six.
        Under load every round trip waits for the database's share of the
        CPU, and it was the batch's round trips, not its CPU, that held
        trigger acceptance back.
        """
        checked = {target.id for target in unchanged}
        records = [
            {**event, "job_id": new_id(), "workflow_steps": None if event["workflow_id"] in checked else event["steps"]}
            for event in events
        ]
        traced = tracing.tracer is not None
        if traced:
            for record in records:
                record.setdefault("trace_context", None)
        rows = await fetch_outside_transaction(
            self.session,
            _events_and_jobs_statement(traced),
            (
                postgres_document(
                    Event.__table__,
                    records,
                    leave_out=_STEPS,
                    extra=("job_id", "workflow_steps", "trace_context") if traced else ("job_id", "workflow_steps"),
                ),
                BUSY if busy else "",
                orjson.dumps([{"id": target.id, "updated_at": target.updated_at.isoformat()} for target in unchanged]).decode(),
            ),
        )
        answered = {event_id for (event_id,) in rows if event_id is not None}
        if _CHANGED in answered:
            raise WorkflowsChanged
        written = answered
        if written:
            mark_jobs_written(self.session)
        return written

    async def transaction_exists(self, environment_id: str, transaction_id: str) -> bool:
        result = await self.session.execute(
            select(Event.id).where(Event.environment_id == environment_id, Event.transaction_id == transaction_id)
        )
        return result.first() is not None

    async def cancel_pending(self, environment_id: str, transaction_id: str) -> int:
        """Cancel the transaction's jobs that wait: delays, open digests, merged events, the steps after them.

        A canceled digest that other events merged into does not take them
        along: the oldest of them opens the digest in its place, due at the
        same time (Novu's ``assignNextDigestJob``), so the others are still
        delivered when it closes. Every canceled job, and every digest handed
        on, gets an execution detail saying so. Returns how many jobs were canceled.
        """
        jobs = (
            await self.session.execute(
                select(Job)
                .where(
                    Job.environment_id == environment_id,
                    Job.transaction_id == transaction_id,
                    Job.status.in_(("delayed", "merged", "pending")),
                )
                .order_by(Job.id)
                .with_for_update()
            )
        ).scalars().all()
        if not jobs:
            return 0
        open_digests = [job for job in jobs if job.status == "delayed" and job.step_type == "digest"]
        now = utcnow()
        for job in jobs:
            job.status = "canceled"
            job.updated_at = now
        await self.session.flush()
        engine = EngineRepository(self.session)
        reason = f"Canceled: transaction {transaction_id} was canceled (DELETE /v1/events/trigger/{transaction_id})"
        details = [_detail(job, "Warning", reason) for job in jobs]
        for master in open_digests:
            promoted = await engine.promote_merged(master)
            if promoted is None:
                continue
            heir, others = promoted
            details.append(
                _detail(
                    master,
                    "Warning",
                    f"Digest handed on to job {heir.id}, the oldest event merged into it, with {others} more events",
                )
            )
            details.append(
                _detail(
                    heir,
                    "Pending",
                    f"Digest reopened by this event: job {master.id}, which held it, was canceled; "
                    f"{others} more events merged into it; open until {isoformat(heir.run_at)}",
                )
            )
        await engine.add_details(details)
        if open_digests:
            await wake_workers(self.session)
        return len(jobs)


def _detail(job: Job, status: str, text: str) -> dict[str, Any]:
    return detail_row(job, status, text)
