"""A real bridge app (@novu/framework 2.13.2 under Node.js, tests/bridge/node/bridge.mjs) and the real ``novu`` CLI.

One bridge process per test module, on a free loopback port, in the framework's
strict mode: each test points it at its own environment's API key (the key
Herald signs with) through the app's ``/config`` route. Without Node.js or
the npm packages (``make test`` installs them) the tests skip, except under
``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.models import ExecutionDetail, Job, Message
from tests.conftest import Tenancy
from tests.fixtures.console import console_as  # noqa: F401  (the console editor's test)
from tests.fixtures.server import running_server

NODE_DIR = Path(__file__).resolve().parent / "node"
FINAL = {"completed", "failed", "skipped", "canceled", "merged"}


def missing(what: str) -> None:
    """Skip on a developer machine; fail under CI, where the set-up must have installed it."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the bridge tests need {what} (CI=true: not skipping)")
    pytest.skip(f"the bridge tests need {what}")


def node_packages() -> str:
    """The path of ``node``, with the pinned packages installed (``npm ci`` when the lock is newer)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        missing("Node.js and npm (apt-get install nodejs npm)")
    installed = NODE_DIR / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < (NODE_DIR / "package-lock.json").stat().st_mtime:
        subprocess.run([str(npm), "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=NODE_DIR, check=True, timeout=300)
        installed.touch()
    return str(node)


@dataclass
class NodeBridge:
    """The running bridge app: its URL, and the controls tests/bridge/node/bridge.mjs offers."""

    process: subprocess.Popen[str]
    origin: str

    @property
    def url(self) -> str:
        return f"{self.origin}/api/novu"

    def configure(self, secret_key: str, workflows: list[str] | None = None) -> None:
        response = httpx.post(f"{self.origin}/config", json={"secretKey": secret_key, "workflows": workflows}, timeout=10)
        response.raise_for_status()

    def requests(self, action: str | None = None) -> list[dict[str, Any]]:
        received = httpx.get(f"{self.origin}/requests", timeout=10).json()
        return [item for item in received if action is None or item["action"] == action]


@pytest.fixture(scope="module")
def node_bridge() -> Iterator[NodeBridge]:
    node = node_packages()
    process = subprocess.Popen(
        [node, str(NODE_DIR / "bridge.mjs"), "0"],
        cwd=NODE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Without NODE_ENV the framework would be in development mode; the app asks for strict mode itself.
        env={**os.environ, "NODE_ENV": "production"},
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.append(process.stdout.readline() if process.stdout else ""), daemon=True)
    reader.start()
    reader.join(60)
    if not lines or not lines[0].startswith("listening "):
        process.kill()
        raise AssertionError(f"the bridge app did not start: {process.stderr.read() if process.stderr else ''}")
    port = int(lines[0].split()[1])
    try:
        yield NodeBridge(process, f"http://127.0.0.1:{port}")
    finally:
        process.kill()
        process.wait(timeout=10)


@pytest.fixture
def bridge(node_bridge: NodeBridge, tenancy: Tenancy) -> NodeBridge:
    """The bridge app, checking signatures against this test's environment's API key, serving every workflow."""
    node_bridge.configure(tenancy.api_key)
    return node_bridge


@pytest.fixture(scope="module")
def herald_url(app: FastAPI) -> Iterator[str]:
    """A real Herald server for the CLI (the tests' own calls go in-process)."""
    with running_server(app.state.settings) as url:
        yield url


def novu_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The ``novu`` CLI 2.20.1 as a team runs it (``npx novu ...``), without its analytics."""
    npx = shutil.which("npx")
    if npx is None:
        missing("npx (npm)")
    env = {**os.environ, "ANALYTICS_ENABLED": "false", "XDG_CONFIG_HOME": str(cwd), "HOME": str(cwd)}
    env.pop("NOVU_SECRET_KEY", None)
    env.pop("NOVU_API_URL", None)
    return subprocess.run(
        [npx, "--no-install", "--prefix", str(NODE_DIR), "novu", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
async def worker(app: FastAPI) -> AsyncIterator[Worker]:
    engine_worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    yield engine_worker
    if engine_worker.http is not None:
        await engine_worker.http.aclose()


async def sync(api: httpx.AsyncClient, bridge: NodeBridge) -> list[dict[str, Any]]:
    response = await api.post("/v1/bridge/sync", params={"source": "cli"}, json={"bridgeUrl": bridge.url})
    assert response.status_code == 201, response.text
    return list(response.json()["data"])


async def trigger(api: httpx.AsyncClient, name: str, to: Any, **body: Any) -> str:
    response = await api.post("/v1/events/trigger", json={"name": name, "to": to, **body})
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["transactionId"])


async def jobs_of(app: FastAPI, transaction_id: str) -> list[Job]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(Job).where(Job.transaction_id == transaction_id, Job.kind == "step").order_by(Job.step_index)
        )
        return list(result.scalars())


async def settle(worker: Worker, app: FastAPI, transaction_id: str, rounds: int = 100) -> list[Job]:
    """Run the worker until every step job of the transaction has a final status (retries included)."""
    jobs: list[Job] = []
    for _ in range(rounds):
        await worker.run_until_idle()
        jobs = await jobs_of(app, transaction_id)
        if jobs and all(job.status in FINAL for job in jobs):
            return jobs
        # A retry's backoff (retry_base_seconds) is what is waited for here: the jobs' own state is what is read.
        await asyncio.sleep(0.02)
    raise AssertionError(f"jobs did not settle: {[(job.step_type, job.status) for job in jobs]}")


async def messages_of(app: FastAPI, transaction_id: str) -> list[Message]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(Message).where(Message.transaction_id == transaction_id).order_by(Message.created_at, Message.id)
        )
        return list(result.scalars())


async def details_of(app: FastAPI, transaction_id: str) -> list[ExecutionDetail]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(ExecutionDetail)
            .where(ExecutionDetail.transaction_id == transaction_id)
            .order_by(ExecutionDetail.created_at, ExecutionDetail.id)
        )
        return list(result.scalars())


def executed(bridge: NodeBridge, workflow_id: str) -> list[dict[str, Any]]:
    """The execute requests the bridge received for one workflow, in order."""
    return [item for item in bridge.requests("execute") if item["workflowId"] == workflow_id]



