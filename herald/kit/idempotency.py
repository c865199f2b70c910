"""The ``idempotency-key`` header on POST and PATCH.

The first request with a key claims it with an insert on the primary key
(environment, key) and runs; its answer is stored for 24 hours and replayed
to repeats with ``Idempotency-Replay: true``. Because the claim is a unique
insert, two copies racing each other cannot both run: the loser gets 409 with
``Retry-After: 1`` (the official SDKs retry 409). A repeat with another body is
refused with 422. A claim whose request died is taken over after
``idempotency_lock_seconds``; a 5xx answer releases the claim so that the
caller's retry can succeed.

Keys are the caller's environment's. Novu keeps them per organization, and
then a Production trigger that reuses a key Development sent is answered with
Development's stored answer and never runs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from dataclasses import dataclass
from datetime import timedelta

import orjson
from sqlalchemy import delete, or_, select, tuple_, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.kit.asgi import header, read_body, replay_receive, send_error, send_response
from herald.kit.auth import ApiKeyResolver, parse_authorization
from herald.kit.crypto import SecretBox
from herald.kit.errors import (
    UnauthorizedError,
    internal_error_response,
    is_store_unavailable,
    store_unavailable_response,
)
from herald.kit.time import utcnow
from herald.models import IdempotencyRecord

logger = logging.getLogger("herald.idempotency")

HEADER = b"idempotency-key"
METHODS = {"POST", "PATCH"}
MAX_KEY_LENGTH = 255
IN_PROGRESS = "in_progress"
# First wait before trying again to release a failed request's claim (doubling, at most 10 s).
RELEASE_RETRY_SECONDS = 0.5
DONE = "done"


@dataclass
class Claim:
    """The outcome of claiming a key: we own it, or the stored record says what to do."""

    owned: bool
    record: IdempotencyRecord | None = None


class IdempotencyRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def claim(
        self, environment_id: str, key: str, body_hash: str, ttl_seconds: int, lock_seconds: int
    ) -> Claim:
        now = utcnow()
        values = {
            "environment_id": environment_id,
            "key": key,
            "body_hash": body_hash,
            "status": IN_PROGRESS,
            "created_at": now,
            "expires_at": now + timedelta(seconds=ttl_seconds),
        }
        insert = pg_insert if self.session.bind.dialect.name == "postgresql" else sqlite_insert
        result = await self.session.execute(
            insert(IdempotencyRecord).values(**values).on_conflict_do_nothing()
        )
        if result.rowcount:  # type: ignore[attr-defined]
            return Claim(owned=True)
        # Take over a record that expired or whose request died while running.
        taken = await self.session.execute(
            update(IdempotencyRecord)
            .where(
                IdempotencyRecord.environment_id == environment_id,
                IdempotencyRecord.key == key,
                or_(
                    IdempotencyRecord.expires_at < now,
                    (IdempotencyRecord.status == IN_PROGRESS)
                    & (IdempotencyRecord.created_at < now - timedelta(seconds=lock_seconds)),
                ),
            )
            .values(**values, status_code=None, response_body=None, content_type=None)
        )
        if taken.rowcount:  # type: ignore[attr-defined]
            return Claim(owned=True)
        record = await self.session.get(IdempotencyRecord, (environment_id, key))
        return Claim(owned=False, record=record)

    async def complete(
        self, environment_id: str, key: str, status_code: int, body: str, content_type: str | None
    ) -> None:
        await self.session.execute(
            update(IdempotencyRecord)
            .where(IdempotencyRecord.environment_id == environment_id, IdempotencyRecord.key == key)
            .values(
                status=DONE,
                status_code=status_code,
                response_body=body,
                content_type=content_type,
            )
        )

    async def release(self, environment_id: str, key: str) -> None:
        await self.session.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.environment_id == environment_id,
                IdempotencyRecord.key == key,
                IdempotencyRecord.status == IN_PROGRESS,
            )
        )

    async def purge_expired(self, limit: int = 5000) -> int:
        """Delete up to ``limit`` records past their 24 hours; returns how many went."""
        expired = (
            select(IdempotencyRecord.environment_id, IdempotencyRecord.key)
            .where(IdempotencyRecord.expires_at < utcnow())
            .limit(limit)
        )
        result = await self.session.execute(
            delete(IdempotencyRecord).where(
                tuple_(IdempotencyRecord.environment_id, IdempotencyRecord.key).in_(expired)
            )
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def get(self, environment_id: str, key: str) -> IdempotencyRecord | None:
        result = await self.session.execute(
            select(IdempotencyRecord).where(
                IdempotencyRecord.environment_id == environment_id, IdempotencyRecord.key == key
            )
        )
        return result.scalar_one_or_none()


def hash_body(body: bytes) -> str:
    """The request body's fingerprint: of the parsed JSON when it is JSON, so layout does not count."""
    try:
        canonical = orjson.dumps(orjson.loads(body)) if body else body
    except (orjson.JSONDecodeError, TypeError):  # not JSON, or numbers orjson cannot hold: the bytes
        canonical = body
    return hashlib.sha256(canonical).hexdigest()


class IdempotencyMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        sessionmaker: async_sessionmaker[AsyncSession],
        api_keys: ApiKeyResolver,
        box: SecretBox,
        ttl_seconds: int,
        lock_seconds: int,
    ) -> None:
        self.app = app
        self.sessionmaker = sessionmaker
        self.api_keys = api_keys
        # Stored answers can carry secrets (an integration's decrypted credentials): sealed at rest.
        self.box = box
        self.ttl_seconds = ttl_seconds
        self.lock_seconds = lock_seconds
        self._releases: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in METHODS:
            await self.app(scope, receive, send)
            return
        key = header(scope, HEADER)
        if not key:  # no header, or an empty one: Novu ignores both
            await self.app(scope, receive, send)
            return
        key_header = [(b"idempotency-key", key.encode("latin-1"))]
        if len(key) > MAX_KEY_LENGTH:
            await send_error(
                scope,
                send,
                400,
                f'idempotencyKey "{key}" has exceeded the maximum allowed length of {MAX_KEY_LENGTH} characters',
            )
            return
        try:
            claimed = await self._claim(scope, receive, key)
        except Exception as exc:  # the middleware runs outside the routes' error handlers
            path, method = scope.get("path", ""), scope.get("method", "")
            failed = store_unavailable_response(path, exc) if is_store_unavailable(exc) else internal_error_response(path, method, exc)
            await send_response(send, failed, key_header)
            return
        if claimed is None:
            # No valid key: let the route answer 401 in the usual way; nothing is claimed.
            await self.app(scope, receive, send)
            return
        environment_id, body, body_hash, claim = claimed
        if not claim.owned:
            await self._answer_repeat(scope, send, key, body_hash, claim.record, key_header)
            return

        captured = _CapturedResponse()
        try:
            await self.app(scope, replay_receive(body, receive), captured.send)
        except BaseException:
            await self._release(environment_id, key)
            raise
        if captured.status is None or captured.status >= 500:
            await self._release(environment_id, key)
        else:
            try:
                async with self.sessionmaker() as session, session.begin():
                    sealed = self.box.seal(captured.body.decode("utf-8", "replace"))
                    await IdempotencyRepository(session).complete(
                        environment_id, key, captured.status, sealed, captured.content_type
                    )
            except Exception:  # the request's own work is committed: its answer still goes out
                logger.exception("could not store the answer for idempotency key %s; repeats get 409 until the claim expires", key)
        await captured.forward(send, key_header)

    async def _claim(self, scope: Scope, receive: Receive, key: str) -> tuple[str, bytes, str, Claim] | None:
        """Claim ``key`` for the caller's environment; None when the caller has no valid API key."""
        # Resolved already when the rate limit charged it (kit/limits.py).
        principal = scope.get("state", {}).get("principal")
        if principal is None:
            try:
                principal = await self.api_keys.resolve(parse_authorization(header(scope, b"authorization")))
            except UnauthorizedError:
                principal = None
        if principal is None:
            return None
        body = await read_body(receive) or b""
        body_hash = hash_body(body)
        async with self.sessionmaker() as session, session.begin():
            claim = await IdempotencyRepository(session).claim(
                principal.environment_id, key, body_hash, self.ttl_seconds, self.lock_seconds
            )
        return principal.environment_id, body, body_hash, claim

    async def _release(self, environment_id: str, key: str) -> None:
        """Free the claim of a request that failed, so that the caller's retry can run.

        The usual reason a request fails is that the store is down, and then
        the release fails too; it is retried in the background until the
        store answers (a retry meanwhile gets 409 and retries again), rather
        than leaving the key locked for ``lock_seconds``.
        """
        if await self._try_release(environment_id, key):
            return
        task = asyncio.create_task(self._release_later(environment_id, key))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _try_release(self, environment_id: str, key: str) -> bool:
        try:
            async with self.sessionmaker() as session, session.begin():
                await IdempotencyRepository(session).release(environment_id, key)
        except Exception as exc:
            logger.warning("could not release idempotency key %s yet (%s: %s)", key, type(exc).__name__, exc)
            return False
        return True

    async def _release_later(self, environment_id: str, key: str) -> None:
        deadline = time.monotonic() + self.lock_seconds
        delay = RELEASE_RETRY_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(delay)
            if await self._try_release(environment_id, key):
                return
            delay = min(delay * 2, 10.0)
        logger.error("gave up releasing idempotency key %s; it expires after %ss", key, self.lock_seconds)

    async def _answer_repeat(
        self,
        scope: Scope,
        send: Send,
        key: str,
        body_hash: str,
        record: IdempotencyRecord | None,
        key_header: list[tuple[bytes, bytes]],
    ) -> None:
        if record is None or record.status == IN_PROGRESS:
            await send_error(
                scope,
                send,
                409,
                f'Request with key "{key}" is currently being processed. Please retry after 1 second',
                [*key_header, (b"retry-after", b"1")],
            )
            return
        if record.body_hash != body_hash:
            await send_error(
                scope, send, 422, f'Request with key "{key}" is being reused for a different body', key_header
            )
            return
        try:
            body = self.box.open(record.response_body or "").encode()
        except ValueError as exc:  # stored under another HERALD_SECRET_KEY
            await send_response(send, internal_error_response(scope.get("path", ""), scope.get("method", ""), exc), key_header)
            return
        await send(
            {
                "type": "http.response.start",
                "status": record.status_code or 200,
                "headers": [
                    (b"content-type", (record.content_type or "application/json").encode("latin-1")),
                    (b"content-length", str(len(body)).encode()),
                    (b"idempotency-replay", b"true"),
                    *key_header,
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class _CapturedResponse:
    """Buffers the inner app's answer so it can be stored before the client sees it."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            self.chunks.append(message.get("body", b""))

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)

    @property
    def content_type(self) -> str | None:
        for name, value in self.headers:
            if name.lower() == b"content-type":
                return value.decode("latin-1")
        return None

    async def forward(self, send: Send, extra_headers: list[tuple[bytes, bytes]]) -> None:
        await send({"type": "http.response.start", "status": self.status or 500, "headers": [*self.headers, *extra_headers]})
        await send({"type": "http.response.body", "body": self.body})
