"""The engine obeys subscriber preferences: each rule decides whether a channel step is delivered, and says why not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine.preferences import Preference, evaluate
from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, messages_of, statements_while, trigger
from tests.engine.test_delivery import IN_APP, SMS, name_of, settle
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer

INBOX_THEN_SMS = [IN_APP, SMS]


@pytest.fixture(scope="module")
def _peer() -> Iterator[HttpPeer]:
    server = HttpPeer().start()
    yield server
    server.stop()


@pytest.fixture
def peer(_peer: HttpPeer) -> Iterator[HttpPeer]:
    _peer.reset()
    yield _peer
    _peer.reset()


async def _sms_integration(api: httpx.AsyncClient, peer: HttpPeer) -> None:
    peers.install_twilio(peer, account_sid="AC1", token="tok")
    await create_integration(
        api, providerId="twilio", channel="sms", active=True,
        credentials={"accountSid": "AC1", "token": "tok", "from": "+100", "baseUrl": peer.url},
    )


async def _patch(api: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
    response = await api.patch(path, json=body)
    assert response.status_code == 200, response.text


async def _run(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, workflow: dict[str, Any], subscriber: dict[str, Any]
) -> tuple[dict[str, str], set[str], list[str]]:
    """Trigger the workflow for the subscriber: each step's job status, the channels delivered, the details' texts."""
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "A-1"})
    jobs = await settle(worker, app, result["transactionId"])
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    details = [detail.detail for detail in await details_of(app, result["transactionId"])]
    return {job.step_type or "": job.status for job in jobs}, {m.channel for m in messages if m.status == "sent"}, details


async def test_without_preferences_every_channel_is_delivered(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS)
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "completed", "sms": "completed"}
    assert delivered == {"in_app", "sms"}
    assert not [text for text in details if text.startswith("preferences:")]


async def test_the_global_preference_turned_off_stops_every_channel(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS)
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences", {"enabled": False})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "canceled", "sms": "canceled"}
    assert delivered == set()
    assert peer.requests_to("/2010-04-01/Accounts/AC1/Messages.json") == []
    assert "preferences: channel in_app disabled by the subscriber's global preference (all channels off)" in details
    assert "preferences: channel sms disabled by the subscriber's global preference (all channels off)" in details


async def test_a_channel_turned_off_globally_stops_that_channel_only(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS)
    # Even a workflow override turning it back on does not beat the global level.
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences", {"preferences": [{"type": "sms", "enabled": False}]})
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences/{workflow['_id']}", {"channel": {"type": "sms", "enabled": True}})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "completed", "sms": "canceled"}
    assert delivered == {"in_app"}
    assert "preferences: channel sms disabled by the subscriber's global preference" in details


async def test_a_critical_workflow_is_delivered_whatever_the_subscriber_chose(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS, critical=True, preferenceSettings={"sms": False})
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences", {"enabled": False})
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences/{workflow['_id']}", {"enabled": False})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "completed", "sms": "completed"}
    assert delivered == {"in_app", "sms"}
    assert not [text for text in details if text.startswith("preferences:")]


async def test_a_channel_the_workflow_turns_off_by_default_is_not_delivered(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS, preferenceSettings={"in_app": False})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    # The step after the one turned off goes on.
    assert statuses == {"in_app": "canceled", "sms": "completed"}
    assert delivered == {"sms"}
    assert "preferences: channel in_app disabled by the workflow's preferenceSettings" in details


async def test_the_subscriber_turns_back_on_a_channel_the_workflow_turns_off(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS, preferenceSettings={"sms": False})
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences/{workflow['_id']}", {"channel": {"type": "sms", "enabled": True}})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "completed", "sms": "completed"}
    assert delivered == {"in_app", "sms"}
    assert not [text for text in details if text.startswith("preferences:")]


async def test_the_subscriber_turns_off_one_channel_of_a_workflow(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS)
    other = await create_workflow(api, steps=INBOX_THEN_SMS)
    # Named by its trigger identifier, through v2.
    await _patch(
        api, f"/v2/subscribers/{subscriber['subscriberId']}/preferences", {"workflowId": name_of(workflow), "channels": {"in_app": False}}
    )
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "canceled", "sms": "completed"}
    assert delivered == {"sms"}
    assert f"preferences: channel in_app disabled by the subscriber for workflow {name_of(workflow)}" in details
    # Another workflow is not concerned.
    statuses, delivered, _ = await _run(api, app, tenancy, worker, other, subscriber)
    assert statuses == {"in_app": "completed", "sms": "completed"}


async def test_the_subscriber_turns_a_whole_workflow_off(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await _sms_integration(api, peer)
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=INBOX_THEN_SMS)
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences/{workflow['_id']}", {"enabled": False})
    statuses, delivered, details = await _run(api, app, tenancy, worker, workflow, subscriber)
    assert statuses == {"in_app": "canceled", "sms": "canceled"}
    assert delivered == set()
    identifier = name_of(workflow)
    assert f"preferences: channel in_app disabled by the subscriber for workflow {identifier} (all channels off)" in details
    assert f"preferences: channel sms disabled by the subscriber for workflow {identifier} (all channels off)" in details


async def test_preferences_are_read_when_the_step_runs_not_at_the_trigger(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """A step after a delay obeys what the subscriber chose while it waited (as Novu, which reads them at send)."""
    from tests.engine.conftest import fast_forward

    subscriber = await create_subscriber(api)
    delay = {"name": "wait", "template": {"type": "delay"}, "metadata": {"type": "regular", "amount": 1, "unit": "hours"}}
    workflow = await create_workflow(api, steps=[delay, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    await worker.run_until_idle()
    await _patch(api, f"/v1/subscribers/{subscriber['subscriberId']}/preferences", {"preferences": [{"type": "in_app", "enabled": False}]})
    assert await fast_forward(app, result["transactionId"]) == 1
    jobs = await settle(worker, app, result["transactionId"])
    assert [job.status for job in jobs] == ["completed", "canceled"]
    assert await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"]) == []


async def test_preferences_are_read_once_for_a_batch_only_for_subscribers_who_set_some(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    """Not at all for a critical workflow, nor when no subscriber of the batch has set a preference."""
    subscribers = [await create_subscriber(api) for _ in range(3)]
    await _patch(api, f"/v1/subscribers/{subscribers[0]['subscriberId']}/preferences", {"enabled": False})
    workflow = await create_workflow(api, steps=[IN_APP])
    critical = await create_workflow(api, steps=[IN_APP], critical=True)

    def reads_preferences(statement: str) -> bool:
        return statement.lstrip().startswith("SELECT subscriber_preferences.")

    cases = ((workflow, subscribers, 1, 2), (critical, subscribers, 0, 3), (workflow, subscribers[1:], 0, 2))
    for chosen, audience, expected_reads, expected_messages in cases:
        result = await trigger(api, name_of(chosen), [s["subscriberId"] for s in audience])
        sent = await statements_while(app, worker.run_until_idle(), reads_preferences)
        assert len(sent) == expected_reads, sent
        messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
        assert len(messages) == expected_messages


def test_the_evaluation_applies_the_rules_in_their_order() -> None:
    def verdict(channel: str = "email", **given: Any) -> tuple[bool, str | None]:
        arguments: dict[str, Any] = {
            "critical": False, "preference_settings": None, "global_preference": None, "workflow_preference": None, **given,
        }
        found = evaluate(channel, "orders", **arguments)
        return found.allowed, found.reason

    off = Preference(enabled=False)
    assert verdict() == (True, None)
    # Steps that are not channel steps, and critical workflows, always go through.
    assert verdict("delay", global_preference=off) == (True, None)
    assert verdict(critical=True, global_preference=off, workflow_preference=off, preference_settings={"email": False}) == (True, None)
    # The global level first: off, or the channel off, wins over everything below.
    assert verdict(global_preference=off, workflow_preference=Preference(channels={"email": True})) == (
        False, "preferences: channel email disabled by the subscriber's global preference (all channels off)",
    )
    assert verdict(global_preference=Preference(channels={"email": False})) == (
        False, "preferences: channel email disabled by the subscriber's global preference",
    )
    assert verdict(global_preference=Preference(channels={"sms": False})) == (True, None)
    # A channel the global level turns on does not beat the workflow's default.
    assert verdict(global_preference=Preference(channels={"email": True}), preference_settings={"email": False}) == (
        False, "preferences: channel email disabled by the workflow's preferenceSettings",
    )
    # Then the workflow's preferenceSettings (a channel left out is on), overridden by the subscriber's own.
    assert verdict(preference_settings={"sms": False}) == (True, None)
    assert verdict(preference_settings={"email": False}, workflow_preference=Preference(channels={"email": True})) == (True, None)
    assert verdict(workflow_preference=Preference(channels={"email": False})) == (
        False, "preferences: channel email disabled by the subscriber for workflow orders",
    )
    assert verdict(workflow_preference=Preference(enabled=False, channels={"email": True})) == (
        False, "preferences: channel email disabled by the subscriber for workflow orders (all channels off)",
    )
