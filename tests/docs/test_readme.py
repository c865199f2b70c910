"""The README's examples run, and its reference tables say what the code does."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from herald.cli import build_parser
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.server import running_server

REPO_ROOT = Path(__file__).resolve().parents[2]
README = (REPO_ROOT / "README.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match, f"no section {title!r} in the README"
    return match.group(1)


@pytest.fixture
def server_url(app: FastAPI) -> Iterator[str]:
    with running_server(app.state.settings) as url:
        yield url


async def test_the_python_example_triggers_the_walkthroughs_workflow(
    server_url: str, api: httpx.AsyncClient, tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    [example] = re.findall(r"```python\n(.*?)```", _section("Five minutes with curl"), re.S)
    assert 'server_url="http://127.0.0.1:3000"' in example
    # The walkthrough's workflow (step 2: its trigger identifier is comment-added) and subscriber (step 3).
    await create_workflow(api, name="Comment added")
    await create_subscriber(api, subscriberId="ada", firstName="Ada", email="ada@example.com")
    monkeypatch.setenv("KEY", tenancy.api_key)

    def run() -> str:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(example.replace("http://127.0.0.1:3000", server_url), "README.md", "exec"), {})
        return printed.getvalue()

    status, transaction_id = (await asyncio.to_thread(run)).split()
    assert status == "processed" and transaction_id.startswith("txn_")
    events = await api.get("/v1/notifications", params={"transactionId": transaction_id})
    assert events.status_code == 200, events.text


def test_every_command_is_a_row_of_the_one_commands_table() -> None:
    lines = _section("Commands").strip().splitlines()
    table = [index for index, line in enumerate(lines) if line.startswith("|")]
    assert table == list(range(table[0], table[0] + len(table))), "the commands table is split"
    rows = "\n".join(lines[index] for index in table)
    commands = next(action for action in build_parser()._actions if action.dest == "command").choices
    for name in commands:
        assert f"| `herald {name}" in rows, f"herald {name} has no row"


def test_the_license_is_an_spdx_expression_the_build_backend_reads_without_a_deprecation() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "MIT"
    # A license as a string is setuptools 77's; older ones read only the table form.
    [setuptools] = [spec for spec in pyproject["build-system"]["requires"] if spec.startswith("setuptools")]
    assert setuptools == "setuptools>=77"
