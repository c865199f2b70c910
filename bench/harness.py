"""Starting and stopping what is measured: the store, Herald's processes, the bare endpoint.

Everything listens on 127.0.0.1 on a free port, logs into the run's temporary
folder, and is stopped (SIGTERM, then SIGKILL after a grace period) when the
run ends, also when it fails. A PostgreSQL run gets a database of its own,
created through the server's admin database and dropped afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx
from sqlalchemy.engine import make_url

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HOST = "127.0.0.1"
SERVERS = ("uvicorn", "granian")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def herald_command(tree: Path = REPO) -> list[str]:
    """The ``herald`` console script of this interpreter's environment, or Herald's CLI from another checkout.

    ``tree``: a checkout of Herald other than this one (bench/ab.py compares
    two). Its CLI runs as a module from that folder, whose ``herald`` package
    then comes before the one installed in the environment.
    """
    script = BIN / "herald"
    if tree == REPO and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "herald.cli"]


# Processes ---------------------------------------------------------------------


@dataclass
class Service:
    """One started process (and, for granian, the worker processes it forks)."""

    name: str
    command: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def pids(self) -> list[int]:
        """This process and its descendants (granian serves from a child process)."""
        return [self.pid, *descendants(self.pid)]

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_seconds: float = 15.0) -> None:
        if not self.alive():
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=grace_seconds)
        except subprocess.TimeoutExpired:
            for pid in reversed(self.pids()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.wait(timeout=5)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def start(name: str, command: list[str], env: dict[str, str], folder: Path, cwd: Path = REPO) -> Service:
    log_path = folder / f"{name}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - the child keeps the file
    try:
        process = subprocess.Popen(
            command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    finally:
        log.close()
    return Service(name, command, log_path, process)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    pending = [pid]
    while pending and len(found) < 1000:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _status_mb(pid: int, name: str) -> float | None:
    """A memory figure of /proc/<pid>/status, in MB; None once the process is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set (VmHWM), in MB."""
    return _status_mb(pid, "VmHWM")


def rss_mb(pid: int) -> float | None:
    """The process's resident set now (VmRSS), in MB."""
    return _status_mb(pid, "VmRSS")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU time the whole machine has spent busy since boot (all cores), from /proc/stat."""
    values = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / CLOCK_TICKS


async def wait_ready(url: str, services: list[Service], timeout: float = 60.0) -> None:
    """Wait until ``url`` answers 200, failing early when a service died."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=2.0) as client:
        while time.monotonic() < deadline:
            for service in services:
                if not service.alive():
                    raise RuntimeError(f"{service.name} exited early:\n{service.log_tail()}")
            try:
                if (await client.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError(f"{url} did not answer within {timeout:.0f}s")


# The store -------------------------------------------------------------------------


@dataclass
class Store:
    """Where the run's data lives: a SQLite file in the temp folder, or a fresh PostgreSQL database."""

    kind: str
    url: str
    admin_url: str | None = None
    database: str | None = None

    @property
    def label(self) -> str:
        return "SQLite" if self.kind == "sqlite" else "PostgreSQL"

    @classmethod
    def sqlite(cls, folder: Path) -> Store:
        return cls("sqlite", f"sqlite:///{folder / 'herald.db'}")

    @classmethod
    async def postgres(cls, admin_url: str) -> Store:
        parsed = make_url(admin_url)
        if parsed.host not in (None, "127.0.0.1", "localhost", "::1"):
            raise ValueError("the benchmark only talks to a PostgreSQL server on 127.0.0.1")
        name = f"herald_bench_{datetime.now(UTC):%Y%m%d%H%M%S}_{secrets.token_hex(3)}"
        connection = await _admin_connect(admin_url)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        url = parsed.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
        return cls("postgres", url, admin_url, name)

    async def drop(self) -> None:
        if self.kind != "postgres" or not self.database or not self.admin_url:
            return
        connection = await _admin_connect(self.admin_url)
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')
        finally:
            await connection.close()

    def backend_pids(self) -> list[int]:
        """PostgreSQL backends serving this run's database (their titles name it), for CPU accounting."""
        if not self.database:
            return []
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                title = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if title.startswith(b"postgres:") and f" {self.database} ".encode() in title:
                found.append(int(entry.name))
        return found


async def _admin_connect(admin_url: str):  # type: ignore[no-untyped-def]
    import asyncpg

    dsn = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    return await asyncio.wait_for(asyncpg.connect(dsn), timeout=10)


# Herald and the bare endpoint ---------------------------------------------------------------


@dataclass
class Deployment:
    """Herald as started for a run: the API process and any separate worker processes."""

    base_url: str
    api_key: str
    api: Service
    workers: list[Service] = field(default_factory=list)

    @property
    def services(self) -> list[Service]:
        return [self.api, *self.workers]

    def stop(self) -> None:
        for service in self.services:
            service.stop()


# The benchmarks send thousands of requests a second with one key, past the
# default rate limits (HERALD_RATE_LIMIT_*, kit/limits.py): they measure
# Herald's capacity, so their processes run unlimited unless --env says otherwise.
UNLIMITED = {"HERALD_RATE_LIMIT_TRIGGERS": "0", "HERALD_RATE_LIMIT_REQUESTS": "0"}


@dataclass
class Environment:
    """The run's temp folder, store and the environment every Herald process gets."""

    folder: Path
    store: Store
    extra_env: dict[str, str] = field(default_factory=dict)
    secret_key: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    services: list[Service] = field(default_factory=list)
    organization_id: str = ""
    environment_id: str = ""
    # What an Inbox names the Development environment by (POST /v1/inbox/session).
    application_identifier: str = ""
    # The checkout of Herald to run (bench/ab.py); this one by default.
    tree: Path = REPO

    def env(self, **more: str) -> dict[str, str]:
        env = dict(os.environ)
        if self.tree != REPO:
            env["PYTHONPATH"] = str(self.tree)
        env.update(
            HERALD_DATA_DIR=str(self.folder / "data"),
            HERALD_DATABASE_URL=self.store.url,
            HERALD_SECRET_KEY=self.secret_key,
            **UNLIMITED,
        )
        env.update(self.extra_env)
        env.update(more)
        return env

    def run_cli(self, *args: str, timeout: float = 120.0) -> str:
        result = subprocess.run(
            [*herald_command(self.tree), *args],
            cwd=self.tree,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise RuntimeError(f"herald {' '.join(args)} failed:\n{result.stderr[-2000:]}")
        return result.stdout

    def prepare(self) -> str:
        """Create the schema and the organization; returns the Development API key."""
        self.run_cli("migrate")
        boot = json.loads(self.run_cli("bootstrap", "--json"))
        development = next(item for item in boot["environments"] if item["name"] == "Development")
        self.organization_id = str(boot["organizationId"])
        self.environment_id = str(development["_id"])
        self.application_identifier = str(development.get("applicationIdentifier") or "")
        return str(development["apiKey"])

    async def seed_subscribers(self, subscriber_ids: list[str], batch: int = 1000) -> None:
        """Insert subscribers straight into the store (setup shortcut for large audiences, never measured).

        The API upserts one subscriber per request; a 100,000-member audience
        would take longer to create than everything measured after it.
        """
        from sqlalchemy import insert

        from herald.kit.db import create_engine
        from herald.kit.ids import new_id
        from herald.kit.time import utcnow
        from herald.models import Subscriber

        engine = create_engine(self.store.url, pool_size=1)
        try:
            for start in range(0, len(subscriber_ids), batch):
                now = utcnow()
                rows = [
                    {
                        "id": new_id(),
                        "environment_id": self.environment_id,
                        "organization_id": self.organization_id,
                        "subscriber_id": subscriber_id,
                        "channels": [],
                        "deleted": False,
                        "version": 0,
                        "created_at": now,
                        "updated_at": now,
                    }
                    for subscriber_id in subscriber_ids[start : start + batch]
                ]
                async with engine.begin() as connection:
                    await connection.execute(insert(Subscriber), rows)
        finally:
            await engine.dispose()

    def _start(self, name: str, command: list[str], env: dict[str, str]) -> Service:
        service = start(name, command, env, self.folder, cwd=self.tree)
        self.services.append(service)
        return service

    async def start_herald(self, server: str, api_key: str, workers: int) -> Deployment:
        """The API (with its in-process worker unless ``workers`` > 0) and ``workers`` worker processes."""
        port = free_port()
        in_process_worker = workers == 0
        if server == "uvicorn":
            command = [*herald_command(self.tree), "serve", "--host", HOST, "--port", str(port)]
            if not in_process_worker:
                command.append("--no-worker")
            api = self._start(f"herald-api-{server}", command, self.env())
        else:
            api = self._start(
                f"herald-api-{server}",
                granian_command("bench.herald_app:app", port),
                self.env(BENCH_RUN_WORKER="1" if in_process_worker else "0"),
            )
        worker_services = [
            self._start(f"herald-worker-{index + 1}", [*herald_command(self.tree), "worker"], self.env())
            for index in range(workers)
        ]
        deployment = Deployment(f"http://{HOST}:{port}", api_key, api, worker_services)
        await wait_ready(f"{deployment.base_url}/v1/health-check", deployment.services)
        return deployment

    async def start_bare(self, server: str) -> Service:
        port = free_port()
        if server == "uvicorn":
            command = [str(BIN / "uvicorn"), "bench.bare_app:app", "--host", HOST, "--port", str(port),
                       "--no-access-log", "--no-server-header", "--log-level", "warning"]
        else:
            command = granian_command("bench.bare_app:app", port)
        service = self._start(f"bare-{server}", command, self.env())
        service.base_url = f"http://{HOST}:{port}"  # type: ignore[attr-defined]
        await wait_ready(f"{service.base_url}/v1/health-check", [service])  # type: ignore[attr-defined]
        return service

    def stop_all(self) -> None:
        for service in reversed(self.services):
            try:
                service.stop()
            except Exception as exc:  # keep stopping the others
                print(f"could not stop {service.name}: {exc}", file=sys.stderr)


@dataclass
class ReadServer:
    """``herald serve --no-worker`` on a store the caller seeds next: its URL, its API key and its workflows."""

    base_url: str
    api_key: str
    # (id, trigger identifier) of each workflow, in the order they were created.
    workflow_ids: list[tuple[str, str]]


async def serve_for_reads(environment: Environment, name: str, *, viewer: tuple[str, str], workflows: int) -> ReadServer:
    """The schema and organization, a console viewer (email, password), ``herald serve --no-worker`` started as
    ``name`` and ``workflows`` one-step in-app workflows: the server bench/console.py and bench/store.py seed their
    messages for and time their reads on. Nothing is delivered (no worker)."""
    key = await asyncio.to_thread(environment.prepare)
    email, password = viewer
    add = subprocess.run(
        [*herald_command(), "users", "add", email, "--role", "viewer", "--password-stdin"],
        input=password, text=True, capture_output=True, env=environment.env(), cwd=REPO, timeout=120,
    )
    if add.returncode != 0:
        raise RuntimeError(f"herald users add failed: {add.stderr[-500:]}")
    port = free_port()
    api = environment._start(name, [*herald_command(), "serve", "--no-worker", "--host", HOST, "--port", str(port)], environment.env())
    base_url = f"http://{HOST}:{port}"
    await wait_ready(f"{base_url}/v1/health-check", [api])
    workflow_ids = []
    async with httpx.AsyncClient(base_url=base_url, headers={"Authorization": f"ApiKey {key}"}, timeout=60) as client:
        for position in range(workflows):
            created = await client.post(
                "/v1/workflows",
                json={"name": f"Bench workflow {position}", "active": True, "tags": ["bench"],
                      "steps": [{"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}]},
            )
            created.raise_for_status()
            data = created.json()["data"]
            workflow_ids.append((data["_id"], data["triggers"][0]["identifier"]))
    return ReadServer(base_url, key, workflow_ids)


def granian_command(target: str, port: int) -> list[str]:
    """One granian worker process, like one uvicorn process: the comparison is per process."""
    executable = BIN / "granian"
    if not executable.exists():
        raise RuntimeError(
            "granian is not installed in this environment; install it with "
            "`uv pip install --python .venv/bin/python granian` or use --server uvicorn"
        )
    return [
        str(executable), "--interface", "asgi", "--host", HOST, "--port", str(port),
        "--workers", "1", "--no-ws", "--log-level", "warning", "--working-dir", str(REPO), target,
    ]


def make_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="herald-bench-"))
    (folder / "data").mkdir()
    return folder


def remove_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
