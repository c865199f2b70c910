"""A delivery that fails, is retried, fails over, is throttled or is refused by the outbound policy logs one
line at its level, with the environment, workflow, transactionId, step, provider and reason; no secret."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import trigger
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer

EMAIL = {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": [{"type": "text", "content": "Order"}]}}
KEY = "SG.secret-key-of-the-log-tests"


@pytest.fixture
def peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def delivery_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="herald.delivery")
    return caplog


def lines(caplog: pytest.LogCaptureFixture, transaction_id: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(level, message, fields) of the delivery lines about one trigger."""
    return [
        (record.levelname, record.getMessage(), record.fields)  # type: ignore[attr-defined]
        for record in caplog.records
        if record.name == "herald.delivery" and record.fields["transactionId"] == transaction_id  # type: ignore[attr-defined]
    ]


async def send_one(api: httpx.AsyncClient, worker: Worker, steps: list[dict[str, Any]], **body: Any) -> tuple[dict[str, Any], str]:
    subscriber = await create_subscriber(api, email="ada.lovelace@example.com")
    workflow = await create_workflow(api, steps=steps)
    result = await trigger(api, workflow["triggers"][0]["identifier"], subscriber["subscriberId"], **body)
    await worker.run_once()  # the trigger's expansion
    await worker.run_once()  # its step's first attempt
    return workflow, result["transactionId"]


async def test_a_retried_then_failed_over_delivery(
    api: httpx.AsyncClient, tenancy: Tenancy, worker: Worker, peer: HttpPeer, delivery_log: pytest.LogCaptureFixture
) -> None:
    # The provider echoes the key it was called with: the line carries the mask, as the execution details do.
    peer.route("POST", "/v3/mail/send", peers.status_answer(503, {"errors": [{"message": f"unavailable for {KEY}"}]}))
    await create_integration(api, providerId="sendgrid", active=True, primary=True, credentials={"apiKey": KEY, "from": "a@example.com", "baseUrl": peer.url})
    await create_integration(api, providerId="sendgrid", active=True, identifier="second-sendgrid", credentials={"apiKey": KEY, "from": "a@example.com", "baseUrl": peer.url})

    workflow, transaction_id = await send_one(api, worker, [EMAIL])

    # The first attempt's two lines (the worker's rounds may have reached the retry already).
    [(failover_level, failover, fields), (retry_level, retry, _)] = lines(delivery_log, transaction_id)[:2]
    assert (failover_level, failover) == ("WARNING", "provider failed, failing over")
    assert (retry_level, retry) == ("WARNING", "delivery failed, will retry")
    assert {key: fields[key] for key in ("environment", "workflow", "transactionId", "step", "provider")} == {
        "environment": tenancy.environment_id,
        "workflow": workflow["triggers"][0]["identifier"],
        "transactionId": transaction_id,
        "step": workflow["steps"][0]["_id"],
        "provider": "sendgrid",
    }
    assert "503" in fields["reason"]
    assert KEY not in delivery_log.text and "ada.lovelace@example.com" not in delivery_log.text


async def test_a_refused_delivery_is_an_error_and_the_outbound_policy_is_named(
    api: httpx.AsyncClient, worker: Worker, delivery_log: pytest.LogCaptureFixture
) -> None:
    # A private address the tests' policy does not allow (only loopback is).
    await create_integration(api, providerId="sendgrid", active=True, primary=True, credentials={"apiKey": KEY, "from": "a@example.com", "baseUrl": "http://10.255.255.1"})

    _, transaction_id = await send_one(api, worker, [EMAIL])

    [(level, message, fields)] = lines(delivery_log, transaction_id)[:1]
    assert (level, message) == ("ERROR", "delivery failed: refused by the outbound policy")
    assert fields["provider"] == "sendgrid" and "10.255.255.1" in fields["reason"]


async def test_a_throttled_step_is_logged_without_the_keys_value(
    api: httpx.AsyncClient, worker: Worker, app: FastAPI, delivery_log: pytest.LogCaptureFixture
) -> None:
    throttle = {"name": "throttle", "template": {"type": "throttle"}, "metadata": {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 1, "throttleKey": "payload.account"}}
    in_app = {"name": "inbox", "template": {"type": "in_app", "content": "Hello"}}
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[throttle, in_app])
    name = workflow["triggers"][0]["identifier"]
    await trigger(api, name, subscriber["subscriberId"], payload={"account": "acct-secret-77"})
    await worker.run_until_idle()
    second = await trigger(api, name, subscriber["subscriberId"], payload={"account": "acct-secret-77"})
    await worker.run_until_idle()

    [(level, message, fields)] = lines(delivery_log, second["transactionId"])
    assert (level, message) == ("INFO", "throttled")
    assert "run 2 of at most 1" in fields["reason"] and "payload.account" in fields["reason"]
    assert "acct-secret-77" not in delivery_log.text
