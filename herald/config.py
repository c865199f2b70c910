"""Settings, read once from the environment.

Every setting has a default that works on a fresh machine: data lives in
``./.herald`` and the store is a SQLite file there. Production deployments set
``HERALD_DATABASE_URL`` to a PostgreSQL URL and ``HERALD_SECRET_KEY``.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from herald.kit.files import create_private_file, make_private_dir

logger = logging.getLogger("herald.config")

SECRET_KEY_FILE = "secret.key"


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    secret_key: str
    host: str = "127.0.0.1"
    port: int = 3000
    # Pool size per process for PostgreSQL; SQLite ignores it.
    database_pool_size: int = 10
    # How long a resolved API key is trusted before it is looked up again.
    api_key_cache_seconds: float = 30.0
    # How often each API process asks the store for keys revoked since its last look.
    api_key_revocation_poll_seconds: float = 1.0
    # Bodies larger than these are refused with 413: 100 KB (Novu's), and HERALD_MAX_BODY for the
    # trigger routes and POST /v1/subscribers/bulk (1 MB; Novu's is 512 KB). Parsing larger ones held
    # the event loop from every other request (five 19 MB triggers: 2.2 s).
    max_body_bytes: int = 100 * 1024
    max_event_body_bytes: int = 1024 * 1024
    # A request head (its request line and headers) not complete this long after its first byte closes
    # its connection (herald/kit/http_protocol.py).
    head_timeout_seconds: float = 30.0
    idempotency_ttl_seconds: int = 24 * 3600
    # A claim older than this is treated as abandoned (the process died).
    idempotency_lock_seconds: int = 300
    log_level: str = "INFO"
    # Run the job worker inside the API process (``herald serve`` without --no-worker).
    run_worker: bool = False
    # Steps a worker runs at once (provider calls in flight): a whole claimed batch. The steps of a batch
    # store what providers accepted together, so more in flight write fewer, larger groups (python -m
    # bench.email, PostgreSQL, 2 workers, 2026-11-26: over an HTTP provider 1,020 emails/s at 24, 1,125 at
    # 48, 1,244 at 100, the workers' CPU an email 1.20 -> 1.03 ms); and a real provider answers in tens to
    # hundreds of milliseconds, which caps a worker at concurrency / answer time messages a second.
    worker_concurrency: int = 100
    # Jobs a worker claims at once; their results are written together.
    worker_batch_size: int = 100
    # First retry of a transient provider failure after about this long, doubling after.
    retry_base_seconds: float = 2.0
    # A running job whose worker has not finished within this is taken by another.
    job_lease_seconds: float = 60.0
    # On SIGTERM a worker finishes the round it runs within this; past it, the round is
    # cancelled and its jobs are queued again for another worker (engine/worker.py).
    shutdown_grace_seconds: float = 8.0
    # Provider failover's circuit breaker (engine/breaker.py): an integration with
    # this many transient failures within the window is skipped for the cool-down,
    # then probed by one message.
    breaker_failures: int = 5
    breaker_window_seconds: float = 60.0
    breaker_cooldown_seconds: float = 30.0
    worker_poll_seconds: float = 0.5
    # How long the worker inside `herald serve` on SQLite, the file's only writer, sleeps while nothing rang
    # and nothing is due (engine/worker.py, SOLE_WRITER_POLL_SECONDS).
    worker_idle_poll_seconds: float = 30.0
    # Webhook deliveries a worker has in flight at once, beside its steps and never in their place, and of
    # those, to one endpoint (webhooks/sender.py): a slow or dead endpoint holds at most that many.
    webhook_concurrency: int = 50
    webhook_endpoint_concurrency: int = 10
    # ``herald worker`` lowers its CPU priority by this much (os.nice): API
    # processes on the same machine answer first when both want the CPU. With
    # 0 it also keeps its pace when an API process says it is busy (queue.BUSY).
    worker_nice: int = 10
    # Days the activity (events, notifications, jobs, execution details) and the
    # messages are kept before the workers delete them; 0 keeps them for ever
    # (engine/retention.py).
    notification_retention_days: float = 30.0
    message_retention_days: float = 365.0
    # Requests a second each environment may make to one API process: triggers
    # (a bulk trigger or broadcast counts 100) and every other route; 0 = no limit
    # (kit/limits.py).
    rate_limit_triggers: float = 1000.0
    rate_limit_requests: float = 500.0
    # Inbox sessions (POST /v1/inbox/session, which may create a subscriber) a minute per environment
    # and client address; 0 = no limit.
    rate_limit_sessions: float = 60.0
    # Recipients one trigger's ``to`` may list (a topic counts as one).
    max_recipients: int = 1000
    # Environments one organization may have, Development and Production included.
    max_environments: int = 10
    # Hosts, IP addresses and CIDR ranges delivery may connect to although the
    # outbound policy refuses them by default (loopback, private, ...; kit/outbound.py).
    outbound_allow: tuple[str, ...] = ()
    # How long an inbox session's subscriber token is good for (@novu/js never
    # renews it: a page open longer starts a new session when reloaded).
    inbox_token_seconds: int = 24 * 3600
    # Origins a browser may call the inbox routes (/v1/inbox) from; "*" is any.
    cors_origins: tuple[str, ...] = ("*",)
    # An API process refreshes its row in the store this often; a row not
    # refreshed for three of these is a dead process, whose subscribers go
    # offline (herald/realtime/service.py).
    realtime_heartbeat_seconds: float = 10.0
    # An Inbox socket that has not joined socket.io's namespace (with a token that verifies) this long
    # after it opened is closed (herald/realtime/server.py). Not read from the environment.
    realtime_namespace_seconds: float = 10.0
    # The address providers reach Herald at (``https://herald.example.com``), when a
    # proxy in front changes it: signatures over the URL (Twilio's) are checked
    # against this + the path instead of the address the request arrived at.
    public_url: str = ""
    # The web console at /console (herald/console); off leaves it out (404).
    console: bool = True
    # Single sign-on with OpenID Connect (herald/members/oidc.py): on when an issuer is set. The role claim
    # names the ID token claim holding one of the four roles; without it (or with another value) a new
    # member gets the default role.
    oidc_issuer: str = ""
    oidc_client_id: str = ""
    oidc_client_secret: str = field(default="", repr=False)
    oidc_role_claim: str = ""
    oidc_default_role: str = "viewer"
    # GET /metrics (herald/kit/metrics.py) asks for ``Authorization: Bearer <token>`` when this is set.
    metrics_token: str = field(default="", repr=False)
    # A worker process's metrics port (``herald worker --metrics-port``); 0 serves none.
    metrics_port: int = 0
    # One line a request in the log (method, route, status, duration, environment).
    access_log: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def sso(self) -> bool:
        """Whether the console offers "Sign in with SSO" (HERALD_OIDC_ISSUER is set)."""
        return bool(self.oidc_issuer)

    @property
    def worker_pool_size(self) -> int:
        """Connections a worker keeps (as many again may overflow).

        Not one per step in flight: a batch's steps share their reads and
        their writes (engine/steps/batch.py); the steps that open sessions of
        their own (digest, throttle, a failing provider's breaker) wait for a
        connection past twelve, so two workers and an API process stay well
        inside PostgreSQL's default of 100 connections.
        """
        return max(2, min(self.worker_concurrency, 12))


def _load_or_create_secret_key(data_dir: Path) -> str:
    """Return the key that encrypts integration secrets.

    Without ``HERALD_SECRET_KEY`` a random key is generated once into the data
    folder, so a single-machine install works out of the box; losing that file
    makes stored secrets unreadable, hence the warning.
    """
    path = data_dir / SECRET_KEY_FILE
    if path.exists():
        return path.read_text().strip()
    make_private_dir(data_dir)
    if not create_private_file(path):
        # Another process made it since we looked.
        return path.read_text().strip()
    key = secrets.token_urlsafe(32)
    path.write_text(key + "\n")
    logger.warning(
        "HERALD_SECRET_KEY is not set: generated a new key into %s. Back it up or set "
        "HERALD_SECRET_KEY; integration secrets cannot be read without it.",
        path,
    )
    return key


class SettingsError(ValueError):
    """A HERALD_* variable that cannot be read; the CLI prints it without a traceback."""


def _number(env: Mapping[str, str], name: str, default: str, kind: type[int] | type[float]) -> int | float:
    raw = env.get(name, default)
    try:
        return kind(raw)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise SettingsError(f"{name} must be {what}, not {raw!r}") from None


SIZE_UNITS = {"": 1, "B": 1, "KB": 1024, "MB": 1024 * 1024}
MAX_BODY_CEILING = 20 * 1024 * 1024


def _size(env: Mapping[str, str], name: str, default: str) -> int:
    """A size in bytes: ``1048576``, ``512KB`` or ``1MB`` (units of 1,024), above 0 and at most 20 MB."""
    raw = env.get(name, default)
    text = raw.strip().upper().replace(" ", "")
    digits = text.rstrip("KMB")
    unit = SIZE_UNITS.get(text[len(digits) :])
    if not digits.isdigit() or unit is None or not 0 < int(digits) * unit <= MAX_BODY_CEILING:
        raise SettingsError(f"{name} must be a size above 0 and at most 20MB, such as 1MB, 512KB or 1048576, not {raw!r}")
    return int(digits) * unit


def _switch(env: Mapping[str, str], name: str, default: str) -> bool:
    raw = env.get(name, default).strip().lower()
    if raw in ("on", "true", "1", "yes"):
        return True
    if raw in ("off", "false", "0", "no"):
        return False
    raise SettingsError(f"{name} must be on or off, not {env[name]!r}")


def _outbound_allow(env: Mapping[str, str]) -> tuple[str, ...]:
    from herald.kit.outbound import SETTING, OutboundPolicy

    entries = tuple(entry.strip() for entry in env.get(SETTING, "").split(",") if entry.strip())
    try:
        OutboundPolicy.allowing(entries)
    except ValueError as exc:
        raise SettingsError(f"{SETTING}: {exc} (a comma-separated list of them)") from None
    return entries


def _oidc(env: Mapping[str, str]) -> dict[str, object]:
    """The HERALD_OIDC_* settings, checked together: an issuer needs a client id, and the rest need an issuer."""
    from urllib.parse import urlsplit

    from herald.members.policy import ROLES

    issuer = env.get("HERALD_OIDC_ISSUER", "").strip()
    client_id = env.get("HERALD_OIDC_CLIENT_ID", "").strip()
    client_secret = env.get("HERALD_OIDC_CLIENT_SECRET", "").strip()
    role_claim = env.get("HERALD_OIDC_ROLE_CLAIM", "").strip()
    default_role = env.get("HERALD_OIDC_DEFAULT_ROLE", "viewer").strip().lower() or "viewer"
    if not issuer:
        others = (("HERALD_OIDC_CLIENT_ID", client_id), ("HERALD_OIDC_CLIENT_SECRET", client_secret), ("HERALD_OIDC_ROLE_CLAIM", role_claim))
        named = [name for name, value in others if value]
        if named:
            raise SettingsError(f"{named[0]} is set but HERALD_OIDC_ISSUER is not: set the identity provider's issuer URL too")
    else:
        parts = urlsplit(issuer)
        loopback = (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")
        if parts.scheme not in ("https", "http") or not parts.hostname or parts.query or parts.fragment or len(issuer) > 500:
            raise SettingsError(
                f"HERALD_OIDC_ISSUER must be the identity provider's issuer URL, like https://id.example.com, not {issuer!r}"
            )
        if parts.scheme == "http" and not loopback:
            raise SettingsError(f"HERALD_OIDC_ISSUER must be an https URL (http only on this machine), not {issuer!r}")
        if not client_id:
            raise SettingsError(
                "HERALD_OIDC_ISSUER is set but HERALD_OIDC_CLIENT_ID is not: set the client id the identity provider gave Herald"
            )
    if len(client_id) > 255 or len(client_secret) > 1000 or len(role_claim) > 100:
        raise SettingsError("HERALD_OIDC_CLIENT_ID, HERALD_OIDC_CLIENT_SECRET or HERALD_OIDC_ROLE_CLAIM is too long")
    if default_role not in ROLES:
        raise SettingsError(
            f"HERALD_OIDC_DEFAULT_ROLE must be one of {', '.join(ROLES)}, not {env['HERALD_OIDC_DEFAULT_ROLE']!r}"
        )
    return {
        "oidc_issuer": issuer,
        "oidc_client_id": client_id,
        "oidc_client_secret": client_secret,
        "oidc_role_claim": role_claim,
        "oidc_default_role": default_role,
    }


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment, with explicit overrides winning."""
    env = os.environ
    data_dir = Path(str(overrides.pop("data_dir", None) or env.get("HERALD_DATA_DIR") or ".herald")).resolve()
    database_url = str(
        overrides.pop("database_url", None)
        or env.get("HERALD_DATABASE_URL")
        or f"sqlite:///{data_dir / 'herald.db'}"
    )
    secret_key = overrides.pop("secret_key", None) or env.get("HERALD_SECRET_KEY")
    if not secret_key:
        secret_key = _load_or_create_secret_key(data_dir)
    values: dict[str, object] = {
        "data_dir": data_dir,
        "database_url": database_url,
        "secret_key": str(secret_key),
        "host": env.get("HERALD_HOST", "127.0.0.1"),
        "port": _number(env, "HERALD_PORT", "3000", int),
        "database_pool_size": _number(env, "HERALD_DATABASE_POOL_SIZE", "10", int),
        "log_level": env.get("HERALD_LOG_LEVEL", "INFO"),
        "worker_concurrency": _number(env, "HERALD_WORKER_CONCURRENCY", "100", int),
        "worker_batch_size": _number(env, "HERALD_WORKER_BATCH_SIZE", "100", int),
        "retry_base_seconds": _number(env, "HERALD_RETRY_BASE_SECONDS", "2.0", float),
        "job_lease_seconds": _number(env, "HERALD_JOB_LEASE_SECONDS", "60", float),
        "shutdown_grace_seconds": _number(env, "HERALD_SHUTDOWN_GRACE_SECONDS", "8", float),
        "breaker_failures": _number(env, "HERALD_BREAKER_FAILURES", "5", int),
        "breaker_window_seconds": _number(env, "HERALD_BREAKER_WINDOW_SECONDS", "60", float),
        "breaker_cooldown_seconds": _number(env, "HERALD_BREAKER_COOLDOWN_SECONDS", "30", float),
        "worker_poll_seconds": _number(env, "HERALD_WORKER_POLL_SECONDS", "0.5", float),
        "worker_idle_poll_seconds": _number(env, "HERALD_WORKER_IDLE_POLL_SECONDS", "30", float),
        "webhook_concurrency": max(1, int(_number(env, "HERALD_WEBHOOK_CONCURRENCY", "50", int))),
        "webhook_endpoint_concurrency": max(1, int(_number(env, "HERALD_WEBHOOK_ENDPOINT_CONCURRENCY", "10", int))),
        "worker_nice": _number(env, "HERALD_WORKER_NICE", "10", int),
        "notification_retention_days": _number(env, "HERALD_NOTIFICATION_RETENTION_DAYS", "30", float),
        "message_retention_days": _number(env, "HERALD_MESSAGE_RETENTION_DAYS", "365", float),
        "rate_limit_triggers": _number(env, "HERALD_RATE_LIMIT_TRIGGERS", "1000", float),
        "rate_limit_requests": _number(env, "HERALD_RATE_LIMIT_REQUESTS", "500", float),
        "rate_limit_sessions": _number(env, "HERALD_RATE_LIMIT_SESSIONS", "60", float),
        "max_event_body_bytes": _size(env, "HERALD_MAX_BODY", "1MB"),
        "head_timeout_seconds": _number(env, "HERALD_HEAD_TIMEOUT_SECONDS", "30", float),
        "max_recipients": _number(env, "HERALD_MAX_RECIPIENTS", "1000", int),
        "max_environments": _number(env, "HERALD_MAX_ENVIRONMENTS", "10", int),
        "outbound_allow": _outbound_allow(env),
        "inbox_token_seconds": _number(env, "HERALD_INBOX_TOKEN_SECONDS", str(24 * 3600), int),
        "public_url": env.get("HERALD_PUBLIC_URL", "").strip(),
        "cors_origins": tuple(
            origin.strip() for origin in env.get("HERALD_CORS_ORIGINS", "*").split(",") if origin.strip()
        ),
        "realtime_heartbeat_seconds": _number(env, "HERALD_REALTIME_HEARTBEAT_SECONDS", "10", float),
        "console": _switch(env, "HERALD_CONSOLE", "on"),
        "metrics_token": env.get("HERALD_METRICS_TOKEN", "").strip(),
        "metrics_port": _number(env, "HERALD_METRICS_PORT", "0", int),
        "access_log": _switch(env, "HERALD_ACCESS_LOG", "on"),
        **_oidc(env),
    }
    for name in ("HERALD_RATE_LIMIT_TRIGGERS", "HERALD_RATE_LIMIT_REQUESTS"):
        if float(values[name[7:].lower()]) < 0:  # type: ignore[arg-type]
            raise SettingsError(f"{name} must be a number of requests a second, 0 for no limit, not {env[name]!r}")
    if float(values["rate_limit_sessions"]) < 0:  # type: ignore[arg-type]
        raise SettingsError(
            f"HERALD_RATE_LIMIT_SESSIONS must be a number of sessions a minute, 0 for no limit, not {env['HERALD_RATE_LIMIT_SESSIONS']!r}"
        )
    if float(values["head_timeout_seconds"]) <= 0:  # type: ignore[arg-type]
        raise SettingsError(
            f"HERALD_HEAD_TIMEOUT_SECONDS must be a number of seconds above 0, not {env['HERALD_HEAD_TIMEOUT_SECONDS']!r}"
        )
    if int(values["max_recipients"]) < 1:  # type: ignore[call-overload]
        raise SettingsError(f"HERALD_MAX_RECIPIENTS must be a whole number above 0, not {env['HERALD_MAX_RECIPIENTS']!r}")
    if int(values["max_environments"]) < 2:  # type: ignore[call-overload]
        raise SettingsError(
            "HERALD_MAX_ENVIRONMENTS must be a whole number of at least 2 (Development and Production), "
            f"not {env['HERALD_MAX_ENVIRONMENTS']!r}"
        )
    for name in ("HERALD_NOTIFICATION_RETENTION_DAYS", "HERALD_MESSAGE_RETENTION_DAYS"):
        if float(env.get(name, "0")) < 0:
            raise SettingsError(f"{name} must be a number of days, 0 to keep for ever, not {env[name]!r}")
    if int(values["breaker_failures"]) < 1:  # type: ignore[call-overload]
        raise SettingsError(f"HERALD_BREAKER_FAILURES must be a whole number above 0, not {env['HERALD_BREAKER_FAILURES']!r}")
    for name in ("HERALD_BREAKER_WINDOW_SECONDS", "HERALD_BREAKER_COOLDOWN_SECONDS"):
        if float(values[name[7:].lower()]) <= 0:  # type: ignore[arg-type]
            raise SettingsError(f"{name} must be a number of seconds above 0, not {env[name]!r}")
    if float(values["realtime_heartbeat_seconds"]) <= 0:  # type: ignore[arg-type]
        raise SettingsError(
            f"HERALD_REALTIME_HEARTBEAT_SECONDS must be a number of seconds above 0, not {env['HERALD_REALTIME_HEARTBEAT_SECONDS']!r}"
        )
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
