"""The ``herald`` command.

Other tooling relies on this contract exactly: ``bootstrap --json`` prints
``{"organizationId", "environments": [{"_id", "name", "apiKey", "applicationIdentifier"}]}``
on every run (``apiKey`` is null once the key exists: it is never shown again);
``serve`` takes ``--host``, ``--port`` and ``--no-worker``.

A command that fails for a reason the operator can fix (an unknown
environment, no organization yet, a database that is not there or not
migrated) prints the reason on stderr as one line and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

from herald import __version__
from herald.config import SECRET_KEY_FILE, Settings, SettingsError, load_settings
from herald.kit import tracing
from herald.kit.backup import BackupRefused
from herald.kit.database_url import StoreUnreachable, checked_url, explain_connect_failure, without_password
from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.errors import HeraldError
from herald.kit.files import create_private_file, make_private_dir
from herald.kit.heap import settle_heap
from herald.kit.logs import LOG_FORMATS, configure_logging

DEV_KEY_FILE = "development-api-key"
# How long requests in flight at SIGTERM (an Inbox's open socket among them) have to end.
REQUESTS_GRACE_SECONDS = 4
# Stands in for the secret key while the settings are only checked (main): never used to encrypt.
UNREAD_SECRET_KEY = "(not read)"
NEW_KEY_HINT = (
    "{names}: the API key was made by an earlier bootstrap and only its hash is stored, so it cannot be shown; "
    "`herald keys create --environment NAME` makes a new one"
)


async def _with_session(settings: Settings, work: Any) -> Any:
    engine = create_engine(settings.database_url, pool_size=2)
    try:
        maker = create_sessionmaker(engine)
        async with maker() as session:
            result = await work(session)
            await session.commit()
            return result
    finally:
        await engine.dispose()


class SchemaNotReady(Exception):
    """The database has no schema, or not the one this code needs."""


def require_schema(database_url: str) -> None:
    """Refuse to go on unless the database's schema is the one this code needs.

    Creates nothing to find out (herald.migrations.current_revision): a command
    refused here leaves no database file behind.
    """
    from herald.migrations import current_revision, schema_mismatch

    mismatch = schema_mismatch(asyncio.run(current_revision(database_url)))
    if mismatch is not None:
        raise SchemaNotReady(f"the database at {without_password(database_url)} {mismatch}")


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    from herald.kit.crypto import SecretBox
    from herald.migrations import current_revision, is_known_revision, schema_mismatch, upgrade
    from herald.migrations.sealing import seal_plaintext_secrets

    # Reached, and at a revision this code knows, before Alembic is let at it.
    current = asyncio.run(current_revision(settings.database_url))
    if current is not None and not is_known_revision(current):
        raise SchemaNotReady(f"the database at {without_password(settings.database_url)} {schema_mismatch(current)}")
    try:
        upgrade(settings.database_url)
    except Exception as exc:
        reason = explain_connect_failure(settings.database_url, exc)
        if reason is None:
            raise
        raise StoreUnreachable(reason) from None
    sealed = asyncio.run(seal_plaintext_secrets(settings.database_url, SecretBox(settings.secret_key)))
    if sealed.integrations or sealed.subscribers:
        print(
            f"Sealed secrets stored in the clear: {sealed.integrations} integrations, "
            f"{sealed.subscribers} subscribers",
            file=sys.stderr,
        )
    print(f"Database is up to date ({settings.database_url.split('@')[-1]})", file=sys.stderr)
    return 0


def cmd_bootstrap(settings: Settings, args: argparse.Namespace) -> int:
    from herald.kit.crypto import SecretBox
    from herald.organizations.service import bootstrap

    box = SecretBox(settings.secret_key)
    result = asyncio.run(_with_session(settings, lambda session: bootstrap(session, box)))
    dev_key_path = settings.data_dir / DEV_KEY_FILE
    environments = [
        {
            "_id": entry.environment.id,
            "name": entry.environment.name,
            "apiKey": entry.api_key,
            # What an Inbox names the environment by (herald/inbox).
            "applicationIdentifier": entry.environment.identifier,
        }
        for entry in result.environments
    ]
    if args.announce:
        _announce(settings, result.created, environments, dev_key_path)
        return 0
    if args.json:
        print(json.dumps({"organizationId": result.organization.id, "environments": environments}))
    else:
        for item in environments:
            key = item["apiKey"] or "(not shown: made earlier)"
            print(f"{item['name']}: environment {item['_id']}, API key {key}")
    hidden = [item["name"] for item in environments if item["apiKey"] is None]
    if hidden:
        print(NEW_KEY_HINT.format(names=", ".join(hidden)), file=sys.stderr)
    return 0


def reachable_base_url(host: str, port: int) -> str:
    """Where a client on this machine reaches a server that listens on ``host``.

    A wildcard address (``0.0.0.0``, ``::``) is where to listen, not where to
    connect: browsers and clients on some systems refuse it, so it is shown as
    the loopback address of its family.
    """
    host = host.strip("[]")
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _announce(settings: Settings, created: bool, environments: list[dict[str, Any]], dev_key_path: Path) -> None:
    """What ``make run`` shows: the Development key (kept in the data folder) and the docs."""
    development = next(item for item in environments if item["name"] == "Development")
    if created:
        make_private_dir(settings.data_dir)
        create_private_file(dev_key_path)
        dev_key_path.chmod(0o600)
        dev_key_path.write_text(development["apiKey"] + "\n")
    key = dev_key_path.read_text().strip() if dev_key_path.exists() else None
    base = reachable_base_url(settings.host, settings.port)
    print("")
    print("  Herald is starting")
    print(f"  API:       {base}/v1")
    print(f"  Docs:      {base}/docs")
    if key:
        print(f"  API key:   {key}   (Development; header: Authorization: ApiKey {key})")
    else:
        print("  API key:   make one with: .venv/bin/herald keys create --environment Development")
    if settings.console:
        print(f"  Console:   {base}/console")
        setup_token = asyncio.run(_with_session(settings, _console_setup_link))
        if setup_token is not None:
            print(f"  First owner: open {base}/console/setup/{setup_token}   (once, within 24 hours)")
        else:
            print("             sign in as a member (.venv/bin/herald users add EMAIL --role owner --password-stdin adds one)")
        if settings.sso:
            print(f"             or sign in with SSO ({settings.oidc_issuer})")
    print("")


async def _console_setup_link(session: Any) -> str | None:
    """A new one-time link to create the console's first owner, while the organization has no member."""
    from herald.members.service import setup_link, the_organization

    return await setup_link(session, (await the_organization(session)).id)


def cmd_users_add(settings: Settings, args: argparse.Namespace) -> int:
    """Add a console member; the password is read from standard input (never from the command line)."""
    from herald.members.policy import CliActor
    from herald.members.service import add_member, the_organization

    password = sys.stdin.readline().rstrip("\r\n") if args.password_stdin else None
    if args.password_stdin and not password:
        raise SettingsError("no password on standard input (echo PASSWORD | herald users add ... --password-stdin)")

    async def add(session: Any) -> Any:
        organization = await the_organization(session)
        return await add_member(
            session, CliActor(organization.id), organization.id, email=args.email, role=args.role, password=password, name=args.name
        )

    member = asyncio.run(_with_session(settings, add))
    print(f"{member.email} {member.role} {member.id}")
    return 0


def cmd_users_list(settings: Settings, _args: argparse.Namespace) -> int:
    """One line a member: email, role, id."""
    from herald.members.service import list_members, the_organization

    async def members(session: Any) -> Any:
        return await list_members(session, (await the_organization(session)).id)

    for member in asyncio.run(_with_session(settings, members)):
        print(f"{member.email} {member.role} {member.id}")
    return 0


def cmd_keys_create(settings: Settings, args: argparse.Namespace) -> int:
    from herald.kit.crypto import SecretBox
    from herald.organizations.service import create_key_for_environment

    box = SecretBox(settings.secret_key)
    environment, key = asyncio.run(
        _with_session(settings, lambda session: create_key_for_environment(session, args.environment, box))
    )
    print(json.dumps({"environmentId": environment.id, "name": environment.name, "apiKey": key}))
    return 0


def cmd_keys_list(settings: Settings, _args: argparse.Namespace) -> int:
    """One line a key: environment, the key masked, when it was made, and whether it is revoked."""
    from herald.kit.crypto import SecretBox
    from herald.organizations.service import list_organization_keys

    box = SecretBox(settings.secret_key)
    for key in asyncio.run(_with_session(settings, lambda session: list_organization_keys(session, box))):
        state = f"revoked {_timestamp(key.revoked_at)}" if key.revoked_at else "active"
        print(f"{key.environment} {key.masked} created {_timestamp(key.created_at)} {state}")
    return 0


def _timestamp(moment: Any) -> str:
    return str(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


def cmd_keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from herald.organizations.service import revoke_key

    revoked = asyncio.run(_with_session(settings, lambda session: revoke_key(session, args.key)))
    print("revoked" if revoked else "no such active key", file=sys.stderr)
    return 0 if revoked else 1


def cmd_environments_protect(settings: Settings, args: argparse.Namespace) -> int:
    """``protect`` and ``unprotect``: the operator, who holds the database, needs no API key for it."""
    from herald.organizations.service import set_protection

    protected = args.environments_command == "protect"
    environment = asyncio.run(
        _with_session(settings, lambda session: set_protection(session, args.name, protected))
    )
    print(json.dumps({"environmentId": environment.id, "name": environment.name, "protected": environment.protected}))
    return 0


def cmd_backup(settings: Settings, args: argparse.Namespace) -> int:
    """A consistent copy of the SQLite database, taken while it is served (herald/kit/backup.py)."""
    from herald.kit.backup import backup_sqlite, sqlite_path

    source = sqlite_path(settings.database_url)
    done = backup_sqlite(source, Path(args.path))
    print(f"Backed up {source} to {done.path} ({_size(done.size)})")
    key = "HERALD_SECRET_KEY" if os.environ.get("HERALD_SECRET_KEY") else str(settings.data_dir / SECRET_KEY_FILE)
    print(
        f"Keep {key} with the backup: without it the sealed secrets in it (integration and subscriber credentials) cannot be opened",
        file=sys.stderr,
    )
    return 0


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} bytes"
    scaled = size / 1024
    for unit in ("KB", "MB"):
        if scaled < 1024:
            return f"{scaled:.1f} {unit}"
        scaled /= 1024
    return f"{scaled:.1f} GB"


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from herald.app import create_app
    from herald.kit.http_protocol import uvicorn_http_options
    from herald.realtime.server import uvicorn_websocket_options

    # The flags win; without them HERALD_HOST and HERALD_PORT (what bootstrap --announce shows).
    settings = load_settings(
        host=args.host or settings.host, port=args.port or settings.port, run_worker=not args.no_worker
    )
    # Bound before the app starts: on a port in use, one line and exit 1, with no worker started first.
    listening = bind_listening_socket(settings.host, settings.port)
    start_traces()
    app = create_app(settings)
    base = reachable_base_url(settings.host, settings.port)
    logging.getLogger("herald").info("API on %s/v1, docs on %s/docs", base, base)
    settle_heap()
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        # Herald's own logging (kit.logs.configure_logging) writes the server's lines, in HERALD_LOG_FORMAT;
        # the access lines are Herald's (kit.metrics.HttpMetrics, with the route and environment).
        log_config=None,
        access_log=False,
        proxy_headers=True,
        server_header=False,
        # SIGTERM: new connections are refused at once; the requests in flight have this long
        # to be answered, then the worker its grace (HERALD_SHUTDOWN_GRACE_SECONDS).
        timeout_graceful_shutdown=REQUESTS_GRACE_SECONDS,
        # Request heads bounded in size and time (herald/kit/http_protocol.py).
        **uvicorn_http_options(settings.head_timeout_seconds),
        # The Inbox's sockets (herald/realtime), held by the thousand: see uvicorn_websocket_options.
        **uvicorn_websocket_options(),
    )
    server = uvicorn.Server(config)
    try:
        server.run(sockets=[listening])
    finally:
        tracing.shutdown()
    if not server.started:
        return 1  # the app failed to start; uvicorn has said why
    return 0


def bind_listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` for uvicorn to listen on; SettingsError (one line) when it cannot be."""
    address = host.strip("[]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    # As uvicorn binds: a restart does not wait for the old connections' TIME_WAIT.
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((address, port))
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            raise SettingsError(
                f"port {port} is in use on {host} (is Herald already running?): stop that process, or choose another port with --port or HERALD_PORT"
            ) from None
        raise SettingsError(f"cannot listen on {host} port {port}: {exc.strerror or exc}") from None
    listening.set_inheritable(True)
    return listening


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    """Run workers alone (no API): ``--concurrency`` jobs at a time in this process."""
    import signal

    from herald.app import build_worker
    from herald.engine.queue import JobSignal, ring_on_commit
    from herald.kit.db import create_engine, create_sessionmaker

    if args.concurrency:
        settings = load_settings(worker_concurrency=args.concurrency)
    metrics_port = args.metrics_port if args.metrics_port is not None else settings.metrics_port
    metrics_host = args.metrics_host or settings.host
    nice = args.nice if args.nice is not None else settings.worker_nice
    if nice:
        # Delivery is background work: on a machine shared with API processes,
        # they get the CPU first when both want it (see docs/deployment.md).
        try:
            os.nice(nice)
        except PermissionError:
            raise SettingsError(
                f"cannot raise the worker's CPU priority by {-nice} without the privilege to (--nice / HERALD_WORKER_NICE {nice}); use 0 or more"
            ) from None

    async def run() -> None:
        engine = create_engine(settings.database_url, pool_size=settings.worker_pool_size, index_reads=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        # The worker's own commits ring it too: the steps a round releases are
        # claimed at once (engine/worker.py), without waiting for NOTIFY.
        job_signal = JobSignal()
        sessions = create_sessionmaker(engine, after_commit=ring_on_commit(job_signal))
        metrics_server = None
        if metrics_port:
            from herald.kit.metrics import serve_port, store_gauges

            try:
                metrics_server = await serve_port(metrics_host, metrics_port, settings.metrics_token, store_gauges(sessions))
            except OSError as exc:
                await engine.dispose()
                raise SettingsError(f"cannot serve the metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}") from None
            logging.getLogger("herald.metrics").info("metrics on http://%s:%d/metrics", metrics_host, metrics_port)
        try:
            worker = build_worker(settings, sessions, signal=job_signal)
            # The same choice as the CPU priority: a worker told not to defer to
            # API processes (nice 0) does not give way to their bursts either.
            worker.give_way = nice > 0
            await worker.run_until_stopped(stop, settings.shutdown_grace_seconds)
        finally:
            if metrics_server is not None:
                metrics_server.close()
            await engine.dispose()

    start_traces()
    settle_heap()
    try:
        run_event_loop(run())
    finally:
        tracing.shutdown()
    return 0


def start_traces() -> None:
    """Traces on when the OTEL_* variables ask for them (herald/kit/tracing.py); a wrong one is one line."""
    try:
        tracing.configure()
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def run_event_loop(main: Any) -> Any:
    """Run ``main`` on uvloop when it is installed (as uvicorn does for the API): its
    sockets are written from C, where asyncio's own transport spent a quarter of a
    busy worker's time in Python."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - installed with uvicorn[standard]
        return asyncio.run(main)
    return uvloop.run(main)


def cmd_dev_smtp(_settings: Settings | None, args: argparse.Namespace) -> int:
    from herald.devtools.smtp import serve_forever

    serve_forever(args.host, args.port)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="herald", description="Herald notification service")
    parser.add_argument("--version", action="version", version=f"herald {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP API (and the in-process worker)")
    serve.add_argument("--host", default=None, help="default: HERALD_HOST, else 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: HERALD_PORT, else 3000")
    serve.add_argument("--no-worker", action="store_true", help="do not run the worker in this process")
    serve.set_defaults(handler=cmd_serve, needs_schema=True)

    worker = commands.add_parser("worker", help="run job workers without the API")
    worker.add_argument("--concurrency", type=int, default=0, help="jobs run at once (default 100)")
    worker.add_argument("--metrics-port", type=int, default=None, help="serve this worker's metrics at http://HOST:N/metrics (default HERALD_METRICS_PORT; 0, the default, serves none)")
    worker.add_argument("--metrics-host", default=None, help="the address the metrics port listens on (default HERALD_HOST, else 127.0.0.1)")
    worker.add_argument("--nice", type=int, default=None, help="lower this process's CPU priority by N (default HERALD_WORKER_NICE, 10; 0 keeps it, and the worker then does not give way to busy API processes either)")
    worker.set_defaults(handler=cmd_worker, needs_schema=True)

    dev_smtp = commands.add_parser("dev-smtp", help="run a local SMTP server that prints the emails it receives")
    dev_smtp.add_argument("--host", default="127.0.0.1")
    dev_smtp.add_argument("--port", type=int, default=2525)
    # Needs no settings: it must not create a data folder or secret key where it is run.
    dev_smtp.set_defaults(handler=cmd_dev_smtp, needs_settings=False)

    backup = commands.add_parser("backup", help="copy the SQLite database to a new file while Herald serves it")
    backup.add_argument("path", help="the new file (an existing file is never overwritten)")
    # No schema check: a backup is what to take before migrating to a newer release.
    backup.set_defaults(handler=cmd_backup)

    migrate = commands.add_parser("migrate", help="create or upgrade the database schema")
    migrate.set_defaults(handler=cmd_migrate)

    boot = commands.add_parser("bootstrap", help="create the organization, its environments and API keys")
    boot.add_argument("--json", action="store_true", help="print the result as JSON")
    boot.add_argument("--announce", action="store_true", help=argparse.SUPPRESS)
    boot.set_defaults(handler=cmd_bootstrap, needs_schema=True)

    keys = commands.add_parser("keys", help="manage API keys")
    key_commands = keys.add_subparsers(dest="keys_command", required=True)
    create = key_commands.add_parser("create", help="create an API key for an environment")
    create.add_argument("--environment", required=True, help="environment name, e.g. Development")
    create.set_defaults(handler=cmd_keys_create, needs_schema=True)
    listing = key_commands.add_parser("list", help="list the API keys, one a line, masked")
    listing.set_defaults(handler=cmd_keys_list, needs_schema=True)
    revoke = key_commands.add_parser("revoke", help="revoke an API key")
    revoke.add_argument("key")
    revoke.set_defaults(handler=cmd_keys_revoke, needs_schema=True)

    environments = commands.add_parser("environments", help="manage environments")
    environment_commands = environments.add_subparsers(dest="environments_command", required=True)
    for name, help_text in (
        ("protect", "let only the environment's own API keys change it"),
        ("unprotect", "let every API key of the organization change the environment"),
    ):
        command = environment_commands.add_parser(name, help=help_text)
        command.add_argument("name", help="environment name, e.g. Production")
        command.set_defaults(handler=cmd_environments_protect, needs_schema=True)

    users = commands.add_parser("users", help="manage the console's members")
    user_commands = users.add_subparsers(dest="users_command", required=True)
    add = user_commands.add_parser("add", help="add a member who signs in with a password")
    add.add_argument("email")
    add.add_argument("--role", required=True, help="owner, admin, author or viewer")
    add.add_argument("--name", default="", help="the member's name, as the console shows it")
    add.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input (without it the member signs in with SSO only)"
    )
    add.set_defaults(handler=cmd_users_add, needs_schema=True)
    listing = user_commands.add_parser("list", help="list the members, one a line: email, role, id")
    listing.set_defaults(handler=cmd_users_list, needs_schema=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    log_format = os.environ.get("HERALD_LOG_FORMAT", "text").strip().lower() or "text"
    if log_format not in LOG_FORMATS:
        print(f"herald {args.command}: HERALD_LOG_FORMAT must be text or json, not {log_format!r}", file=sys.stderr)
        return 1
    # Logging first: loading settings may warn (a secret key generated into the data folder).
    configure_logging(os.environ.get("HERALD_LOG_LEVEL", "INFO"), log_format)
    try:
        settings = None
        if getattr(args, "needs_settings", True):
            # Read and checked before anything is created: loading the settings
            # generates the secret key into the data folder when there is none,
            # and a command refused for want of a schema leaves nothing behind.
            database_url = load_settings(secret_key=UNREAD_SECRET_KEY).database_url
            checked_url(database_url)
            if getattr(args, "needs_schema", False):
                require_schema(database_url)
            settings = load_settings()
        return int(args.handler(settings, args) or 0)
    except HeraldError as exc:
        print(f"herald {args.command}: {_one_line(exc)}", file=sys.stderr)
        return 1
    except (SettingsError, StoreUnreachable, SchemaNotReady, BackupRefused) as exc:
        print(f"herald {args.command}: {exc}", file=sys.stderr)
        return 1


def _one_line(exc: HeraldError) -> str:
    """The error's message; a validation failure's first field message rather than "Validation Error"."""
    errors = exc.extra.get("errors")
    if isinstance(errors, dict):
        for entry in errors.values():
            messages = entry.get("messages") if isinstance(entry, dict) else None
            if messages:
                return str(messages[0])
    return exc.message


if __name__ == "__main__":
    sys.exit(main())
