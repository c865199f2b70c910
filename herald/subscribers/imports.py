"""CSV imports of subscribers: a file's lines created or updated in batches, by a task that outlives the request.

The file is checked when it arrives (:func:`start_import`: size, encoding,
header) and stored in its ``subscriber_imports`` row with the count of its
lines. Its task (:class:`ImportRunner`) then reads it :data:`BATCH_ROWS`
lines at a time and writes each batch in one transaction with the row's
progress: one look-up of the batch's subscriberIds (to count the created
ones), one ``INSERT ... ON CONFLICT DO UPDATE`` of its subscribers
(herald.kit.bulk), and the counts, so the counts always say what is stored.
Each line is checked as ``POST /v1/subscribers`` checks its body.

A process that stops in the middle leaves the row ``running`` with a stale
heartbeat (``updated_at``); the next look at the import's page, or the next
sweep of a worker (herald.engine.worker), takes it up from the first line not
written (:meth:`ImportRunner.take_up_if_stalled`). Importing a file again is safe: a subscriber is matched by its
subscriberId and updated.

Columns: ``subscriberId`` (required), ``email``, ``firstName``,
``lastName``, ``phone``, ``locale``, ``avatar``, and ``data.<name>`` (each
becomes ``data[name]``; the subscriber's ``data`` is replaced when any
``data.`` cell of the line has a value). An empty cell leaves that attribute
as it is. A refused line is named by its line number in the file (the header
is line 1) with the reason.
"""

from __future__ import annotations

import asyncio
import csv
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from herald.audit.service import record
from herald.kit.auth import Principal
from herald.kit.crypto import SecretBox
from herald.kit.errors import NotFoundError, ValidationFailed
from herald.kit.time import utcnow
from herald.members.policy import SystemActor
from herald.models import SubscriberImport
from herald.subscribers.repository import SubscriberImportRepository, SubscriberRepository
from herald.subscribers.schemas import CreateSubscriberRequest

logger = logging.getLogger(__name__)

# The largest file taken (docs/console.md): 100,000 subscribers with a few data columns fit well within it.
MAX_FILE_BYTES = 25 * 1024 * 1024
MAX_ROWS = 250_000
# Lines written per transaction: the progress moves at each.
BATCH_ROWS = 1000
# Refused lines listed with their reasons; past this many only the count grows.
MAX_REFUSED_LISTED = 1000
# A running import whose heartbeat is older than this has lost its process.
STALLED_AFTER = timedelta(seconds=60)
ATTRIBUTES = ("subscriberId", "email", "firstName", "lastName", "phone", "locale", "avatar")
DATA_PREFIX = "data."
MAX_COLUMNS = 100
FINISHED = ("completed", "failed")


@dataclass(frozen=True)
class Line:
    number: int
    values: dict[str, str]
    # Why the line cannot be read, when it cannot.
    problem: str | None = None


def check_header(header: list[str]) -> list[str]:
    """The header's column names, stripped; ValidationFailed (field ``file``) naming what is wrong."""
    names = [name.strip() for name in header]
    if "subscriberId" not in names:
        raise ValidationFailed.field("file", "The first line must name the columns, with subscriberId among them", None)
    unknown = [name for name in names if name not in ATTRIBUTES and not (name.startswith(DATA_PREFIX) and len(name) > len(DATA_PREFIX))]
    if unknown:
        listed = ", ".join(unknown[:5])
        raise ValidationFailed.field("file", f"Unknown columns: {listed}. Use {', '.join(ATTRIBUTES)} and data.<name>", None)
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValidationFailed.field("file", f"Columns named twice: {', '.join(repeated)}", None)
    if len(names) > MAX_COLUMNS:
        raise ValidationFailed.field("file", f"At most {MAX_COLUMNS} columns", None)
    return names


def decode(content: bytes) -> str:
    """The file as text (UTF-8, with or without its byte order mark)."""
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed.field("file", f"The file is not UTF-8 text (byte {exc.start + 1})", None) from exc


def read_lines(text: str, skip: int = 0) -> Iterator[Line]:
    """The file's lines after the header (``skip`` of them passed over), each with its line number.

    A line that cannot be read is yielded with its problem, to be refused with
    its number; a quote left open ends the file there (what follows is inside it).
    """
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    names = check_header(next(reader, []))
    seen = 0
    while True:
        start = reader.line_num + 1
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error:
            yield Line(start, {}, "the line is not valid CSV (a quote is not closed)")
            return
        if not any(cell.strip() for cell in cells):
            continue
        seen += 1
        if seen <= skip:
            continue
        if len(cells) > len(names):
            yield Line(start, {}, f"the line has {len(cells)} cells; the header names {len(names)} columns")
        else:
            yield Line(start, dict(zip(names, cells, strict=False)))


def count_lines(text: str) -> int:
    """How many lines hold a subscriber (the header checked first)."""
    return sum(1 for _ in read_lines(text))


def to_request(line: Line) -> CreateSubscriberRequest | str:
    """The line as a subscriber to write, or why it is refused."""
    if line.problem is not None:
        return line.problem
    body: dict[str, Any] = {}
    data: dict[str, Any] = {}
    for name, raw in line.values.items():
        value = raw.strip()
        if not value:
            continue
        if name.startswith(DATA_PREFIX):
            data[name[len(DATA_PREFIX) :]] = value
        else:
            body[name] = value
    if data:
        body["data"] = data
    if not body.get("subscriberId"):
        return "subscriberId is empty"
    try:
        return CreateSubscriberRequest.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        return f"{where}: {error['msg']}"[:300]


async def start_import(
    session: AsyncSession, principal: Principal, *, filename: str, content: bytes, member_email: str | None
) -> SubscriberImport:
    """Check the file and store it as a queued import (ValidationFailed, field ``file``, when it cannot be)."""
    if not content:
        raise ValidationFailed.field("file", "Choose a CSV file to import", None)
    if len(content) > MAX_FILE_BYTES:
        raise ValidationFailed.field("file", f"The file is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB", None)
    text = decode(content)
    try:
        total = count_lines(text)
    except csv.Error as exc:
        raise ValidationFailed.field("file", f"The header cannot be read as CSV: {exc}", None) from exc
    if total == 0:
        raise ValidationFailed.field("file", "The file has no subscribers after its header", None)
    if total > MAX_ROWS:
        raise ValidationFailed.field("file", f"The file has {total:,} lines; at most {MAX_ROWS:,} in one import", None)
    row = SubscriberImport(
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        member_email=member_email,
        filename=(filename or "subscribers.csv")[:255],
        status="queued",
        source=text,
        size_bytes=len(content),
        total_rows=total,
        refused=[],
    )
    await SubscriberImportRepository(session).add(row)
    return row


async def get_import(session: AsyncSession, principal: Principal, import_id: str) -> SubscriberImport:
    found = await SubscriberImportRepository(session).get(principal.environment_id, import_id[:64])
    if found is None:
        raise NotFoundError(f"Import {import_id} was not found")
    return found


async def progress_of(session: AsyncSession, principal: Principal, import_id: str) -> tuple[str, int] | None:
    """(status, lines done) of the import, None when it is not the environment's."""
    return await SubscriberImportRepository(session).progress_of(principal.environment_id, import_id)


async def recent_imports(session: AsyncSession, principal: Principal, limit: int = 10) -> list[SubscriberImport]:
    return await SubscriberImportRepository(session).newest(principal.environment_id, limit)


def is_stalled(row: SubscriberImport) -> bool:
    return row.status not in FINISHED and row.updated_at < utcnow() - STALLED_AFTER


# CSV column -> subscribers column (herald.subscribers.repository.UPSERTED_COLUMNS).
_COLUMN_OF = {"email": "email", "firstName": "first_name", "lastName": "last_name", "phone": "phone", "locale": "locale", "avatar": "avatar", "data": "data"}


async def _write_batch(session: AsyncSession, row: SubscriberImport, lines: list[Line]) -> None:
    """One batch of lines and the import's progress, in the session's transaction.

    The lines are written in one upsert (a subscriberId named twice in the
    batch is one row, its later cells winning); the created ones are told
    apart by looking the subscriberIds up first.
    """
    by_id: dict[str, dict[str, Any]] = {}
    refused: list[dict[str, Any]] = []
    repeated = 0
    for line in lines:
        outcome = to_request(line)
        if isinstance(outcome, str):
            refused.append({"line": line.number, "subscriberId": line.values.get("subscriberId") or None, "reason": outcome})
            continue
        given = {_COLUMN_OF[name]: getattr(outcome, name) for name in outcome.model_fields_set if name in _COLUMN_OF}
        if outcome.subscriberId in by_id:
            repeated += 1
            by_id[outcome.subscriberId].update(given)
        else:
            by_id[outcome.subscriberId] = {"subscriber_id": outcome.subscriberId, **given}
    repository = SubscriberRepository(session)
    existing = await repository.existing_subscriber_ids(row.environment_id, list(by_id))
    await repository.upsert_attributes(row.environment_id, row.organization_id, list(by_id.values()))
    row.created_count += len(by_id) - len(existing)
    row.updated_count += len(existing) + repeated
    row.refused_count += len(refused)
    room = MAX_REFUSED_LISTED - len(row.refused or [])
    if refused and room > 0:
        row.refused = [*(row.refused or []), *refused[:room]]
    row.processed_rows += len(lines)
    row.updated_at = utcnow()


@dataclass
class ImportRunner:
    """This process's import tasks, and the signal their progress rings (the progress page's events)."""

    sessionmaker: async_sessionmaker[AsyncSession]
    box: SecretBox
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _progress: dict[str, asyncio.Event] = field(default_factory=dict)

    def start(self, import_id: str) -> None:
        """Run the import in a task of this process (it outlives the request that asked)."""
        if import_id in self.tasks:
            return
        task = asyncio.get_running_loop().create_task(self._run(import_id), name=f"subscriber-import-{import_id}")
        self.tasks[import_id] = task
        task.add_done_callback(lambda _: self.tasks.pop(import_id, None))

    async def wait(self, import_id: str) -> None:
        """Until the import's task in this process ends (nothing to wait for when there is none)."""
        task = self.tasks.get(import_id)
        if task is not None:
            await asyncio.shield(task)

    async def wait_for_progress(self, import_id: str, timeout: float) -> bool:
        """Whether the import moved within ``timeout`` seconds (a batch written here, or its end)."""
        event = self._progress.setdefault(import_id, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            return False
        finally:
            if event.is_set():
                self._progress.pop(import_id, None)
        return True

    def _ring(self, import_id: str) -> None:
        event = self._progress.get(import_id)
        if event is not None:
            event.set()

    async def take_up_if_stalled(self, session: AsyncSession, row: SubscriberImport) -> bool:
        """Claim, in ``session``'s transaction, an import whose process stopped (or never began it).

        True when this process is to run it: the caller calls :meth:`start` once
        that transaction is committed (the task reads what it claimed).
        """
        if row.id in self.tasks or row.status in FINISHED or row.updated_at >= utcnow() - STALLED_AFTER:
            return False
        claimed = await SubscriberImportRepository(session).claim(row.id, row.updated_at, utcnow())
        if claimed:
            logger.warning("subscriber import %s had stopped at line %d; taken up again", row.id, row.processed_rows)
        return claimed

    async def take_up_stalled(self, limit: int = 5) -> int:
        """Claim and start the imports whose process stopped, whoever started them (a worker's sweep)."""
        async with self.sessionmaker() as session, session.begin():
            rows = await SubscriberImportRepository(session).stalled(utcnow() - STALLED_AFTER, limit)
            claimed = [row.id for row in rows if await self.take_up_if_stalled(session, row)]
        for import_id in claimed:
            self.start(import_id)
        return len(claimed)

    async def _run(self, import_id: str) -> None:
        try:
            await self._import(import_id)
        except Exception as exc:  # the import fails with why; the server goes on
            logger.exception("subscriber import %s failed", import_id)
            async with self.sessionmaker() as session, session.begin():
                row = await SubscriberImportRepository(session).get_for_update(import_id)
                if row is not None:
                    row.status, row.error, row.source = "failed", f"The import stopped: {type(exc).__name__}"[:1000], None
                    row.finished_at = row.updated_at = utcnow()
        finally:
            self._ring(import_id)

    async def _import(self, import_id: str) -> None:
        async with self.sessionmaker() as session, session.begin():
            row = await SubscriberImportRepository(session).get_for_update(import_id)
            if row is None or row.status in FINISHED or row.source is None:
                return
            row.status, row.updated_at = "running", utcnow()
            text, done = row.source, row.processed_rows
        lines = read_lines(text, skip=done)
        while True:
            batch = [line for _, line in zip(range(BATCH_ROWS), lines, strict=False)]
            if not batch:
                break
            async with self.sessionmaker() as session, session.begin():
                row = await SubscriberImportRepository(session).get_for_update(import_id)
                if row is None:
                    return
                await _write_batch(session, row, batch)
            self._ring(import_id)
            # Other requests of this process get their turn between batches (SQLite runs on this loop).
            await asyncio.sleep(0)
        async with self.sessionmaker() as session, session.begin():
            row = await SubscriberImportRepository(session).get_for_update(import_id)
            if row is None:
                return
            row.status, row.source = "completed", None
            row.finished_at = row.updated_at = utcnow()
            record(
                session,
                SystemActor(row.organization_id),
                "subscriber_import.completed",
                "subscriber_import",
                row.id,
                environment_id=row.environment_id,
                changes={
                    "filename": row.filename,
                    "created": row.created_count,
                    "updated": row.updated_count,
                    "refused": row.refused_count,
                },
            )


def runner_of(state: Any) -> ImportRunner:
    """The app's runner (one per process), made on first use."""
    runner = getattr(state, "subscriber_imports", None)
    if runner is None:
        runner = ImportRunner(state.sessionmaker, state.secret_box)
        state.subscriber_imports = runner
    return runner
