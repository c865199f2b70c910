"""The ``herald`` command as operators and tooling run it: real processes, exit codes, stdout and stderr."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import time
import tomllib
from pathlib import Path

import httpx
import pytest

import herald
from herald.kit.db import create_engine, create_sessionmaker
from herald.organizations.repository import OrganizationRepository
from herald.organizations.service import hash_api_key
from tests.fixtures import stores
from tests.fixtures.processes import HERALD_COMMAND, REPO_ROOT, HeraldProcesses, wait_until
from tests.fixtures.server import free_port

NEW_KEY_HINT = "`herald keys create --environment NAME` makes a new one"


async def _active(url: str, key: str) -> bool:
    engine = create_engine(url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            return await OrganizationRepository(session).find_active_key(hash_api_key(key)) is not None
    finally:
        await engine.dispose()


async def test_migrate_bootstrap_and_keys(empty_database: stores.TestDatabase, tmp_path: Path) -> None:
    herald = HeraldProcesses(database_url=empty_database.url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")
    herald.migrate()
    herald.migrate()  # again: nothing to do, no error

    first_run = herald.run_command("bootstrap", "--json")
    assert first_run.returncode == 0, first_run.stderr
    first = json.loads(first_run.stdout)
    assert list(first) == ["organizationId", "environments"]
    assert [env["name"] for env in first["environments"]] == ["Development", "Production"]
    for env in first["environments"]:
        assert list(env) == ["_id", "name", "apiKey", "applicationIdentifier"]
        assert isinstance(env["apiKey"], str) and env["apiKey"]
        # What an Inbox (@novu/js) names the environment by.
        assert isinstance(env["applicationIdentifier"], str) and env["applicationIdentifier"]
    assert NEW_KEY_HINT not in first_run.stderr

    # Idempotent, and the same shape: the keys exist but cannot be shown again.
    second_run = herald.run_command("bootstrap", "--json")
    assert second_run.returncode == 0, second_run.stderr
    assert json.loads(second_run.stdout) == {
        "organizationId": first["organizationId"],
        "environments": [{**env, "apiKey": None} for env in first["environments"]],
    }
    assert NEW_KEY_HINT in second_run.stderr

    development, production = first["environments"]
    created = json.loads(herald.run("keys", "create", "--environment", "Production"))
    assert created["environmentId"] == production["_id"] and created["name"] == "Production"
    assert created["apiKey"] not in (development["apiKey"], production["apiKey"])
    assert await _active(empty_database.url, created["apiKey"])

    unknown = herald.run_command("keys", "create", "--environment", "Nope")
    assert unknown.returncode == 1
    assert unknown.stdout == ""
    assert "Environment Nope not found (environments: Development, Production)" in unknown.stderr
    assert "Traceback" not in unknown.stderr

    revoked = herald.run_command("keys", "revoke", created["apiKey"])
    assert (revoked.returncode, revoked.stderr.strip()) == (0, "revoked")
    assert not await _active(empty_database.url, created["apiKey"])
    assert await _active(empty_database.url, production["apiKey"])
    again = herald.run_command("keys", "revoke", created["apiKey"])
    assert (again.returncode, again.stderr.strip()) == (1, "no such active key")

    # One line a key, masked: never the key itself.
    listed = herald.run("keys", "list").splitlines()
    assert [line.split(" ")[0] for line in listed] == ["Development", "Production", "Production"]
    shown = [created, development, production]
    for line, key in zip(listed, [development, production, created], strict=True):
        assert f" {key['apiKey'][:3]}****{key['apiKey'][-4:]} created " in line
        assert not any(item["apiKey"] in line for item in shown)
    assert [line.split(" ")[4] for line in listed] == ["active", "active", "revoked"]


def test_version() -> None:
    done = subprocess.run([*HERALD_COMMAND, "--version"], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, f"herald {herald.__version__}\n")
    assert herald.__version__ == tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


async def _protected(url: str) -> dict[str, bool]:
    engine = create_engine(url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            organization = await OrganizationRepository(session).first_organization()
            assert organization is not None
            environments = await OrganizationRepository(session).list_environments(organization.id)
            return {environment.name: environment.protected for environment in environments}
    finally:
        await engine.dispose()


async def test_environments_protect_and_unprotect(empty_database: stores.TestDatabase, tmp_path: Path) -> None:
    """The operator sets ``protected`` without a key; Production starts protected."""
    herald = HeraldProcesses(database_url=empty_database.url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")
    herald.migrate()
    development, production = json.loads(herald.run("bootstrap", "--json"))["environments"]
    assert await _protected(empty_database.url) == {"Development": False, "Production": True}

    lifted = json.loads(herald.run("environments", "unprotect", "Production"))
    assert lifted == {"environmentId": production["_id"], "name": "Production", "protected": False}
    protected = json.loads(herald.run("environments", "protect", "Development"))
    assert protected == {"environmentId": development["_id"], "name": "Development", "protected": True}
    assert await _protected(empty_database.url) == {"Development": True, "Production": False}

    unknown = herald.run_command("environments", "protect", "Nope")
    assert (unknown.returncode, unknown.stdout) == (1, "")
    assert unknown.stderr.strip().splitlines() == [
        "herald environments: Environment Nope not found (environments: Development, Production)"
    ]


def _plain_environment(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERALD_")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), **extra}


def _herald(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``herald ARGS`` run in ``folder`` with only these settings; its exit code and output, whatever they are."""
    return subprocess.run(
        [*HERALD_COMMAND, *args], cwd=folder, env=_plain_environment(**env), capture_output=True, text=True, timeout=60, check=False
    )


def test_without_a_secret_key_one_is_generated_into_the_data_folder(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    done = subprocess.run(
        [*HERALD_COMMAND, "migrate"],
        cwd=tmp_path,
        env=_plain_environment(HERALD_DATA_DIR=str(data_dir)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    key_file = data_dir / "secret.key"
    assert len(key_file.read_text().strip()) >= 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    # Logged through the configured format (time, level, logger), not logging's bare fallback.
    [warning] = [line for line in done.stderr.splitlines() if "HERALD_SECRET_KEY is not set" in line]
    assert " WARNING herald.config HERALD_SECRET_KEY is not set: generated a new key into " in warning
    assert str(key_file) in warning


def test_dev_smtp_leaves_no_data_folder_behind(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*HERALD_COMMAND, "dev-smtp", "--port", str(port)],
        cwd=tmp_path,
        env=_plain_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "dev-smtp did not start"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert not (tmp_path / ".herald").exists()




def test_serve_on_a_port_in_use_says_so_in_one_line_before_starting_anything(tmp_path: Path) -> None:
    herald = HeraldProcesses(
        database_url=f"sqlite:///{tmp_path / 'herald.db'}", data_dir=tmp_path / "data", log_dir=tmp_path / "logs"
    )
    herald.migrate()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = herald.run_command("serve", "--host", "127.0.0.1", "--port", str(port))
    assert done.returncode == 1
    # Nothing started before it (no worker, no application startup): the one line is all.
    assert done.stderr.strip().splitlines() == [
        f"herald serve: port {port} is in use on 127.0.0.1 (is Herald already running?): "
        "stop that process, or choose another port with --port or HERALD_PORT"
    ]


async def test_serve_listens_where_bootstrap_announces(tmp_path: Path) -> None:
    """``make run``: ``bootstrap --announce`` then ``serve`` without flags, both from HERALD_HOST/HERALD_PORT."""
    port = free_port()
    herald = HeraldProcesses(
        database_url=f"sqlite:///{tmp_path / 'herald.db'}",
        data_dir=tmp_path / "data",
        log_dir=tmp_path / "logs",
        env={"HERALD_HOST": "127.0.0.1", "HERALD_PORT": str(port)},
    )
    herald.migrate()
    announced = herald.run("bootstrap", "--announce")
    assert f"Docs:      http://127.0.0.1:{port}/docs" in announced
    server = herald.spawn("serve", "serve", "--no-worker")
    try:

        async def healthy() -> bool:
            assert server.alive(), server.describe()
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as client:
                    return (await client.get("/v1/health-check")).status_code == 200
            except httpx.TransportError:
                return False

        await wait_until(healthy, timeout=30, what="herald serve on HERALD_PORT", describe=server.describe)
    finally:
        herald.stop_all()


def test_a_setting_that_is_not_a_number_is_named_without_a_traceback(tmp_path: Path) -> None:
    done = _herald(tmp_path, "worker", HERALD_DATA_DIR=str(tmp_path / "data"), HERALD_WORKER_NICE="low")
    assert done.returncode == 1
    assert done.stderr.strip().endswith("herald worker: HERALD_WORKER_NICE must be a whole number, not 'low'")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("nice", "gives_way"), [("0", False), ("3", True)])
def test_herald_worker_gives_way_to_busy_api_processes_unless_told_not_to_defer(
    nice: str, gives_way: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--nice 0`` (HERALD_WORKER_NICE=0) keeps the worker's priority and its pace under API bursts."""
    from herald import cli
    from herald.engine.worker import Worker
    from herald.migrations import upgrade

    seen: dict[str, object] = {}

    async def run_forever(self: Worker, stop: object) -> None:
        seen["give_way"] = self.give_way
        if self.http is not None:
            await self.http.aclose()

    monkeypatch.setenv("HERALD_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("HERALD_DATABASE_URL", raising=False)
    upgrade(f"sqlite:///{tmp_path / 'herald.db'}")  # the worker refuses a database with no schema
    monkeypatch.setattr(Worker, "run_forever", run_forever)
    monkeypatch.setattr(cli.os, "nice", lambda increment: increment)  # the test process keeps its priority
    monkeypatch.setattr(cli, "settle_heap", lambda: None)  # and its collector
    assert cli.main(["worker", "--nice", nice]) == 0
    assert seen == {"give_way": gives_way}


def test_an_unknown_log_format_is_named_without_a_traceback(tmp_path: Path) -> None:
    done = _herald(tmp_path, "migrate", HERALD_DATA_DIR=str(tmp_path / "data"), HERALD_LOG_FORMAT="xml")
    assert (done.returncode, done.stderr.strip()) == (1, "herald migrate: HERALD_LOG_FORMAT must be text or json, not 'xml'")
    assert not (tmp_path / "data").exists()


def test_a_workers_metrics_port_in_use_is_one_line_and_exit_1(tmp_path: Path) -> None:
    from herald.migrations import upgrade

    upgrade(f"sqlite:///{tmp_path / 'herald.db'}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = _herald(tmp_path, "worker", "--nice", "0", "--metrics-port", str(port), HERALD_DATA_DIR=str(tmp_path))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"herald worker: cannot serve the metrics on 127.0.0.1:{port}: ")
    assert "Traceback" not in done.stderr
