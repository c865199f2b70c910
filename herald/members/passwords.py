"""Passwords: argon2id hashes (argon2-cffi), checked off the event loop.

A hash takes about 50 ms of CPU and 64 MiB of memory (argon2-cffi's
defaults, RFC 9106's low-memory profile), which is the point: a stolen table
of hashes costs an attacker as much per guess. Hashing runs in a thread, at
most ``HASHES_AT_ONCE`` at a time, so a flood of sign-ins queues rather than
stalling every other request or taking gigabytes.

A sign-in for an email nobody has checks the password against a dummy hash,
so the answer takes as long as for a member's wrong password: the time does
not tell which emails are members.
"""

from __future__ import annotations

import asyncio
from functools import cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from herald.kit.errors import ValidationFailed

MIN_LENGTH = 10
# Bounded like every input; argon2 would hash more, but no one types this much.
MAX_LENGTH = 256
HASHES_AT_ONCE = 2

_hasher = PasswordHasher()
_slots: asyncio.Semaphore | None = None


def _semaphore() -> asyncio.Semaphore:
    global _slots
    if _slots is None:
        _slots = asyncio.Semaphore(HASHES_AT_ONCE)
    return _slots


@cache
def _dummy_hash() -> str:
    return _hasher.hash("herald: no member has this password")


def check_new_password(password: str, field: str = "password") -> None:
    """422 for a password that is too short or too long."""
    if len(password) < MIN_LENGTH:
        raise ValidationFailed.field(field, f"The password must be at least {MIN_LENGTH} characters long")
    if len(password) > MAX_LENGTH:
        raise ValidationFailed.field(field, f"The password must be at most {MAX_LENGTH} characters long")


async def hash_password(password: str) -> str:
    async with _semaphore():
        return await asyncio.to_thread(_hasher.hash, password)


def _verify(stored: str | None, password: str) -> bool:
    try:
        return _hasher.verify(stored or _dummy_hash(), password) and stored is not None
    except (VerificationError, InvalidHashError):
        return False


async def verify_password(stored: str | None, password: str) -> bool:
    """Whether ``password`` matches the hash ``stored``; None (no such member) costs the same and is False."""
    if len(password) > MAX_LENGTH:
        password = password[:MAX_LENGTH + 1]
    async with _semaphore():
        return await asyncio.to_thread(_verify, stored, password)
