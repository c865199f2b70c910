"""Record identifiers.

Novu's ids are MongoDB ObjectIds: 24 hex characters whose first four bytes are
the creation time. SDKs and dashboards expect that shape, and the time prefix
keeps b-tree inserts near the right edge of indexes, so Herald makes the same.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from datetime import datetime

_counter_lock = threading.Lock()
_counter = int.from_bytes(os.urandom(3), "big")
_process_unique = os.urandom(5)


def new_id() -> str:
    """A 24-hex ObjectId: 4 bytes of seconds, 5 random per process, 3 of counter."""
    global _counter
    with _counter_lock:
        _counter = (_counter + 1) & 0xFFFFFF
        count = _counter
    return (
        int(time.time()).to_bytes(4, "big") + _process_unique + count.to_bytes(3, "big")
    ).hex()


def id_floor(moment: datetime) -> str:
    """The smallest id made at ``moment``'s second: every id made before it compares lower.

    Ids begin with their creation time, so "made before" is a range of the
    primary key and needs no index of its own (retention uses this).
    """
    return (int(moment.timestamp()).to_bytes(4, "big") + bytes(8)).hex()


def reset_after_fork() -> None:
    """Give a forked worker its own random part so ids never collide."""
    global _process_unique
    _process_unique = os.urandom(5)


def new_transaction_id() -> str:
    """Novu's form: ``txn_`` followed by an ObjectId-like value."""
    return f"txn_{new_id()}"


def short_id(length: int = 8) -> str:
    """A short url-safe suffix for generated identifiers (``sendgrid-Ab3x_9Qz``)."""
    return secrets.token_urlsafe(length)[:length]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=reset_after_fork)
