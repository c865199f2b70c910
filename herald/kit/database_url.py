"""What the operator is told about ``HERALD_DATABASE_URL``: the schemes Herald speaks, and why a store cannot be reached.

The ``herald`` commands print these as one line and exit 1 (cli.py), rather
than a driver's traceback.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from herald.config import SettingsError

SUPPORTED = "sqlite:///path or postgresql://user:password@host:port/database"
SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite", "sqlite+aiosqlite", "sqlite+heraldinline"}
POSTGRES_DRIVERS = {"postgresql", "postgres", "postgresql+asyncpg", "postgresql+psycopg", "postgresql+psycopg2"}

# PostgreSQL's SQLSTATEs for a connection it refused.
DATABASE_DOES_NOT_EXIST = "3D000"
AUTHORIZATION_FAILED = {"28000", "28P01"}


class StoreUnreachable(Exception):
    """The store named by the URL cannot be used as it is; the message says why and what to do."""


def checked_url(url: str) -> URL:
    """The parsed URL, or a SettingsError naming the schemes Herald supports."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        parsed = None
    if parsed is not None and parsed.drivername in SQLITE_DRIVERS | POSTGRES_DRIVERS:
        return parsed
    if "://" not in url:
        raise SettingsError(f"HERALD_DATABASE_URL is not a database URL: use {SUPPORTED}")
    # The scheme only: the rest may hold a password.
    scheme = url.split("://", 1)[0]
    raise SettingsError(f"HERALD_DATABASE_URL names a store Herald does not support ({scheme}://...): use {SUPPORTED}")


def without_password(url: str) -> str:
    """The URL as it may be shown: the password left out."""
    try:
        return make_url(url)._replace(password=None).render_as_string(hide_password=False)
    except ArgumentError:
        return url.split("@")[-1]


def explain_connect_failure(url: str, exc: BaseException) -> str | None:
    """One line for an error met while connecting to ``url``; None for an error that is not about connecting."""
    parsed = make_url(url)
    if parsed.drivername in SQLITE_DRIVERS:
        original = getattr(exc, "orig", exc)
        if isinstance(original, sqlite3.OperationalError) and "unable to open" in str(original):
            return f"cannot open the SQLite database {parsed.database}: {original}; check the path in HERALD_DATABASE_URL"
        return None
    server = f"{parsed.host or 'localhost'}:{parsed.port or 5432}"
    if isinstance(exc, DBAPIError):
        state = getattr(exc.orig, "sqlstate", None) or getattr(exc.orig, "pgcode", None)
        if state == DATABASE_DOES_NOT_EXIST:
            name = parsed.database or parsed.username
            command = f"createdb -h {parsed.host or 'localhost'} -p {parsed.port or 5432}"
            if parsed.username:
                command += f" -U {parsed.username}"
            return (
                f'the database "{name}" does not exist on {server}: '
                f"create it ({command} {name}) or set HERALD_DATABASE_URL"
            )
        if state in AUTHORIZATION_FAILED:
            return f"the PostgreSQL server at {server} refused the connection ({exc.orig}): check the user and password in HERALD_DATABASE_URL"
        return None
    if isinstance(exc, OSError | TimeoutError):
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else (str(exc) or type(exc).__name__)
        return f"no PostgreSQL server answers at {server} ({reason}): start it or set HERALD_DATABASE_URL"
    return None
