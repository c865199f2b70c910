"""@novu/api 3.19 (Novu's Node SDK, unmodified, pinned by package-lock.json) against a running Herald.

Each operation of ``operations.mjs`` is one test case: the test makes a fresh world in its own
organization (a subscriber with two in-app messages the engine sent, another subscriber, a workflow,
integrations, a topic, a delayed transaction) and has ``run.mjs`` run the operation on that world
(one ``node run.mjs --serve`` for the session: loading the SDK takes seconds), and the entry's own check (node:assert, reading Herald back through
the SDK where the operation changed something) must pass; the SDK validates every answer with its
zod models on the way. Without Node.js and the npm packages (``make test`` installs them) the tests
skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import Tenancy
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow, unique
from tests.fixtures.server import running_server
from tests.sdk.operations.runs import run_worker
from tests.sdk.operations.test_coverage import sdk_operations, served

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "run.mjs"
# The names of the entries of operations.mjs, read without Node.js so the cases are listed even where it is missing.
OPERATIONS = re.findall(r'^\s*name: "([\w.]+)",$', (HERE / "operations.mjs").read_text(), re.MULTILINE)
CTA_STEP = {
    "name": "inbox",
    "template": {
        "type": "in_app",
        "content": "Hello {{payload.name}}",
        "cta": {
            "type": "redirect",
            "data": {"url": "/"},
            "action": {"buttons": [{"type": "primary", "content": "Yes"}]},
        },
    },
}
DELAYED_STEPS = [
    {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "regular", "unit": "hours", "amount": 1}},
    {"name": "inbox", "template": {"type": "in_app", "content": "later"}},
]


def missing(what: str) -> None:
    """Skip on a developer machine; fail under CI, where the set-up must have installed it."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"the Node SDK tests need {what} (CI=true: not skipping)")
    pytest.skip(f"the Node SDK tests need {what}")


class NodeRunner:
    """``node run.mjs --serve``: one request line in, one outcome line out, one operation at a time."""

    def __init__(self, node: str) -> None:
        self.process = subprocess.Popen(
            [node, str(RUNNER), "--serve"],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lock = threading.Lock()

    def run(self, request: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            lines: list[str] = []
            reader = threading.Thread(target=lambda: lines.append(self.process.stdout.readline()), daemon=True)
            reader.start()
            reader.join(timeout)
        if not lines or not lines[0]:
            self.close()
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise AssertionError(f"run.mjs answered nothing within {timeout} s: {stderr}")
        return dict(json.loads(lines[0]))

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture(scope="session")
def node_runner() -> Iterator[NodeRunner]:
    executable = shutil.which("node")
    npm = shutil.which("npm")
    if executable is None or npm is None:
        missing("Node.js and npm (apt-get install nodejs npm)")
    installed = HERE / "node_modules" / ".package-lock.json"
    if not installed.exists() or installed.stat().st_mtime < (HERE / "package-lock.json").stat().st_mtime:
        subprocess.run(
            [str(npm), "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HERE, check=True, timeout=300
        )
        installed.touch()
    runner = NodeRunner(str(executable))
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def node_server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
        yield url


async def trigger(api: httpx.AsyncClient, workflow: dict[str, Any], subscriber_id: str, name: str) -> str:
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": {"name": name}},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["transactionId"])


async def make_world(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> dict[str, Any]:
    """What the operations work on, made through Herald's API and its engine; only ids go to Node."""
    workflow = await create_workflow(api, steps=[CTA_STEP])
    delayed = await create_workflow(api, steps=DELAYED_STEPS)
    subscriber = await create_subscriber(api)
    other = await create_subscriber(api)
    sendgrid = await create_integration(api, active=True)
    postmark = await create_integration(api, providerId="postmark", active=True)
    await create_integration(api, providerId="fcm", channel="push", active=True)
    topic_key = unique("topic")
    assert (await api.post("/v1/topics", json={"key": topic_key, "name": "Readers"})).status_code == 201
    added = await api.post(f"/v1/topics/{topic_key}/subscribers", json={"subscribers": [subscriber["subscriberId"]]})
    assert added.status_code == 200, added.text

    transactions = [await trigger(api, workflow, subscriber["subscriberId"], name) for name in ("one", "two")]
    delayed_transaction = await trigger(api, delayed, other["subscriberId"], "later")
    await run_worker(app)
    messages: dict[str, dict[str, Any]] = {}
    for transaction_id in transactions:
        response = await api.get("/v1/messages", params={"transactionId": transaction_id})
        [message] = response.json()["data"]
        messages[transaction_id] = message
    return {
        "environmentId": tenancy.environment_id,
        "workflow": {"id": workflow["_id"], "identifier": workflow["triggers"][0]["identifier"]},
        "subscriberId": subscriber["subscriberId"],
        "subscriberInternalId": subscriber["_id"],
        "otherSubscriberId": other["subscriberId"],
        "topicKey": topic_key,
        "integrationIds": {"sendgrid": sendgrid["_id"], "postmark": postmark["_id"]},
        "transactionIds": transactions,
        "messageIds": [messages[t]["_id"] for t in transactions],
        "notificationIds": [messages[t]["_notificationId"] for t in transactions],
        "delayedTransactionId": delayed_transaction,
    }


def test_every_operation_is_listed() -> None:
    """The regular expression finds every entry (a reformatted entry would silently drop out)."""
    entries = (HERE / "operations.mjs").read_text().count("\n  {\n    name:")
    assert len(OPERATIONS) == entries >= 106, (len(OPERATIONS), entries)
    assert len(set(OPERATIONS)) == len(OPERATIONS)


def node_name(python_path: str) -> str:
    """novu-py's ``translations.master.import_master_json`` is @novu/api's ``translations.master.import``."""
    camel = ".".join(re.sub(r"_([a-z])", lambda match: match.group(1).upper(), part) for part in python_path.split("."))
    return "translations.master.import" if camel == "translations.master.importMasterJson" else camel


def test_the_same_operations_as_novu_py() -> None:
    """Every operation Herald serves to novu-py (tests/sdk/operations/test_coverage.py) has its entry here too."""
    expected = {node_name(path) for path in sdk_operations() if served(path)}
    assert sorted(expected - set(OPERATIONS)) == [], "served operations without a Node SDK entry"
    assert sorted(set(OPERATIONS) - expected) == [], "entries that are no operation Herald serves"


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_operation(
    operation: str,
    node_runner: NodeRunner,
    node_server_url: str,
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
) -> None:
    world = await make_world(api, app, tenancy)
    request = {"serverURL": node_server_url, "apiKey": tenancy.api_key, "operation": operation, "world": world}
    outcome = await asyncio.to_thread(node_runner.run, request)
    assert outcome["operation"] == operation
    assert outcome["ok"] is True, json.dumps(outcome.get("error"), indent=2)
    assert "result" in outcome


def test_the_runner_takes_operations_on_its_command_line(node_runner: NodeRunner) -> None:
    """The command-line form reports an unknown operation as a failure (exit 1), one JSON line for it."""
    completed = subprocess.run(
        [node_runner.process.args[0], str(RUNNER), "http://127.0.0.1:9", "key", "no.such.operation"],
        input="{}",
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=120,
    )
    assert completed.returncode == 1
    assert json.loads(completed.stdout) == {
        "operation": "no.such.operation",
        "ok": False,
        "error": {"message": "no operation named no.such.operation"},
    }
