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
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from herald.config import Settings, SettingsError, load_settings
from herald.kit.database_url import StoreUnreachable, checked_url, explain_connect_failure, without_password
from herald.kit.db import create_engine, create_sessionmaker
from herald.kit.errors import HeraldError
from herald.kit.files import create_private_file, make_private_dir
from herald.kit.heap import settle_heap
from herald.kit.logs import mask_server_log_secrets, quiet_http_client_logs

DEV_KEY_FILE = "development-api-key"
# Stands in for the secret key while the settings are only checked (main): never used to encrypt.
UNREAD_SECRET_KEY = "(not read)"
NEW_KEY_HINT = (
    "{names}: the API key was made by an earlier bootstrap and only its hash is stored, so it cannot be shown; "
    "`herald keys create --environment NAME` makes a new one"
)


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    quiet_http_client_logs()
    mask_server_log_secrets()


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
    print("")


def cmd_keys_create(settings: Settings, args: argparse.Namespace) -> int:
    from herald.kit.crypto import SecretBox
    from herald.organizations.service import create_key_for_environment

    box = SecretBox(settings.secret_key)
    environment, key = asyncio.run(
        _with_session(settings, lambda session: create_key_for_environment(session, args.environment, box))
    )
    print(json.dumps({"environmentId": environment.id, "name": environment.name, "apiKey": key}))
    return 0


def cmd_keys_revoke(settings: Settings, args: argparse.Namespace) -> int:
    from herald.organizations.service import revoke_key

    revoked = asyncio.run(_with_session(settings, lambda session: revoke_key(session, args.key)))
    print("revoked" if revoked else "no such active key", file=sys.stderr)
    return 0 if revoked else 1


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from herald.app import create_app
    from herald.realtime.server import uvicorn_websocket_options

    # The flags win; without them HERALD_HOST and HERALD_PORT (what bootstrap --announce shows).
    settings = load_settings(
        host=args.host or settings.host, port=args.port or settings.port, run_worker=not args.no_worker
    )
    app = create_app(settings)
    base = reachable_base_url(settings.host, settings.port)
    logging.getLogger("herald").info("API on %s/v1, docs on %s/docs", base, base)
    settle_heap()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level.lower(),
        access_log=False,
        proxy_headers=True,
        server_header=False,
        # The Inbox's sockets (herald/realtime), held by the thousand: see uvicorn_websocket_options.
        **uvicorn_websocket_options(),
    )
    return 0


def cmd_worker(settings: Settings, args: argparse.Namespace) -> int:
    """Run workers alone (no API): ``--concurrency`` jobs at a time in this process."""
    import signal

    from herald.app import build_worker
    from herald.engine.queue import JobSignal, ring_on_commit
    from herald.kit.db import create_engine, create_sessionmaker

    if args.concurrency:
        settings = load_settings(worker_concurrency=args.concurrency)
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
        try:
            worker = build_worker(settings, sessions, signal=job_signal)
            # The same choice as the CPU priority: a worker told not to defer to
            # API processes (nice 0) does not give way to their bursts either.
            worker.give_way = nice > 0
            await worker.run_forever(stop)
        finally:
            await engine.dispose()

    settle_heap()
    run_event_loop(run())
    return 0


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
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP API (and the in-process worker)")
    serve.add_argument("--host", default=None, help="default: HERALD_HOST, else 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: HERALD_PORT, else 3000")
    serve.add_argument("--no-worker", action="store_true", help="do not run the worker in this process")
    serve.set_defaults(handler=cmd_serve, needs_schema=True)

    worker = commands.add_parser("worker", help="run job workers without the API")
    worker.add_argument("--concurrency", type=int, default=0, help="jobs run at once (default 100)")
    worker.add_argument("--nice", type=int, default=None, help="lower this process's CPU priority by N (default HERALD_WORKER_NICE, 10; 0 keeps it, and the worker then does not give way to busy API processes either)")
    worker.set_defaults(handler=cmd_worker, needs_schema=True)

    dev_smtp = commands.add_parser("dev-smtp", help="run a local SMTP server that prints the emails it receives")
    dev_smtp.add_argument("--host", default="127.0.0.1")
    dev_smtp.add_argument("--port", type=int, default=2525)
    # Needs no settings: it must not create a data folder or secret key where it is run.
    dev_smtp.set_defaults(handler=cmd_dev_smtp, needs_settings=False)

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
    revoke = key_commands.add_parser("revoke", help="revoke an API key")
    revoke.add_argument("key")
    revoke.set_defaults(handler=cmd_keys_revoke, needs_schema=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Logging first: loading settings may warn (a secret key generated into the data folder).
    _configure_logging(os.environ.get("HERALD_LOG_LEVEL", "INFO"))
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
        print(f"herald {args.command}: {exc.message}", file=sys.stderr)
        return 1
    except (SettingsError, StoreUnreachable, SchemaNotReady) as exc:
        print(f"herald {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
