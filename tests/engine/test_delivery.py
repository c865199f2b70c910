"""Email, sms, chat and push steps end to end, against local protocol peers."""

from __future__ import annotations

import asyncio
import contextlib
import email
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import select, update

from herald.app import build_worker
from herald.engine.worker import Worker
from herald.kit.time import utcnow
from herald.models import Job
from tests.conftest import Tenancy
from tests.engine.conftest import details_of, jobs_of, messages_of, trigger
from tests.fixtures import peers
from tests.fixtures.builders import create_integration, create_subscriber, create_workflow
from tests.fixtures.peers import HttpPeer, SmtpPeer

EMAIL = {"name": "mail", "template": {"type": "email", "subject": "Hi {{subscriber.firstName}}", "content": [{"type": "text", "content": "Your order {{payload.order}}"}]}}
SMS = {"name": "text", "template": {"type": "sms", "content": "Order {{payload.order}} shipped"}}
IN_APP = {"name": "inbox", "template": {"type": "in_app", "content": "done"}}


@pytest.fixture
def smtp() -> Iterator[SmtpPeer]:
    server = SmtpPeer().start()
    yield server
    server.stop()


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


async def settle(worker: Worker, app: FastAPI, transaction_id: str, rounds: int = 60) -> list[Job]:
    """Run the worker until every step job of the transaction has a final status (retries included)."""
    final = {"completed", "failed", "skipped", "canceled", "merged"}
    for _ in range(rounds):
        await worker.run_until_idle()
        jobs = [j for j in await jobs_of(app, transaction_id) if j.kind == "step"]
        if jobs and all(j.status in final for j in jobs):
            return jobs
        await asyncio.sleep(0.03)
    raise AssertionError(f"jobs did not settle: {[(j.step_type, j.status) for j in jobs]}")


def name_of(workflow: dict[str, Any]) -> str:
    return workflow["triggers"][0]["identifier"]


async def test_email_goes_through_the_primary_smtp_integration(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    await create_integration(
        api,
        providerId="nodemailer",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "senderName": "Herald", "ignoreTls": True},
    )
    subscriber = await create_subscriber(api, email="ada@example.com", firstName="Ada")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "A-1"})
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed"
    [mail] = smtp.received
    assert mail.rcpt_tos == ["ada@example.com"]
    parsed = email.message_from_bytes(mail.data)
    assert parsed["Subject"] == "Hi Ada"
    assert "Herald" in parsed["From"]
    bodies = [part.get_payload(decode=True).decode() for part in parsed.walk() if part.get_content_maintype() == "text"]
    assert any("Your order A-1" in body for body in bodies)
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert (message.channel, message.status, message.email) == ("email", "sent", "ada@example.com")
    assert message.provider_id == "nodemailer"
    assert any(d.detail.startswith("Accepted by nodemailer") for d in await details_of(app, result["transactionId"]))

    # A worker that runs the same job again (its lease ran out) does not send twice.
    async with app.state.sessionmaker() as session:
        again = await session.get(Job, job.id)
        again.status = "queued"
        await session.commit()
    await settle(worker, app, result["transactionId"])
    assert len(smtp.received) == 1


async def test_sms_override_picks_another_integration(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peers.install_twilio(peer, account_sid="AC1", token="tok")
    primary = await create_integration(api, providerId="twilio", channel="sms", active=True, credentials={"accountSid": "AC1", "token": "wrong", "from": "+100", "baseUrl": peer.url})
    chosen = await create_integration(api, providerId="twilio", channel="sms", active=True, identifier="backup-sms", credentials={"accountSid": "AC1", "token": "tok", "from": "+100", "baseUrl": peer.url})
    assert primary["primary"] and not chosen["primary"]
    subscriber = await create_subscriber(api, phone="+15550001")
    workflow = await create_workflow(api, steps=[SMS])
    result = await trigger(
        api, name_of(workflow), subscriber["subscriberId"], payload={"order": "B-2"}, overrides={"sms": {"integrationIdentifier": "backup-sms"}}
    )
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed"
    [request] = peer.requests_to("/2010-04-01/Accounts/AC1/Messages.json")
    assert request.form_value("Body") == "Order B-2 shipped"
    assert request.form_value("To") == "+15550001"
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "sent" and message.provider_message_id.startswith("SM")

    # Without the override the primary (with a wrong token) is used, and fails for good: no retry.
    failed = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "C-3"})
    [job] = await settle(worker, app, failed["transactionId"])
    assert job.status == "failed" and job.attempts == 1
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=failed["transactionId"])
    assert message.status == "error" and "Authenticate" in (message.error_text or "")
    assert message.error_id


async def test_transient_failures_are_retried_then_recorded_as_error(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peer.route("POST", "/v3/mail/send", peers.status_answer(503, {"errors": [{"message": "unavailable"}]}))
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.x", "from": "a@example.com", "baseUrl": peer.url})
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "D"})
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["failed", "completed"]
    assert jobs[0].attempts == jobs[0].max_attempts
    assert len(peer.requests_to("/v3/mail/send")) == jobs[0].max_attempts
    messages = {m.channel: m for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])}
    assert messages["email"].status == "error"
    assert messages["email"].error_id and "503" in (messages["email"].error_text or "")
    retries = [d for d in await details_of(app, result["transactionId"]) if "will retry" in d.detail]
    assert len(retries) == jobs[0].max_attempts - 1


async def test_transient_failure_then_success(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    answers = iter([peers.status_answer(429, {"errors": []}), None])
    peers.install_sendgrid(peer, api_key="SG.y")
    ok_handler = peer._routes[-1][2]

    def flaky(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        handler = next(answers, None) or ok_handler
        return handler(request)

    peer.reset()
    peer.route("POST", "/v3/mail/send", flaky)
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.y", "from": "a@example.com", "baseUrl": peer.url})
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "E"})
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed" and job.attempts == 2
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "sent"


async def test_missing_address_is_a_warning_and_the_workflow_goes_on(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api, email=None, phone=None)
    workflow = await create_workflow(api, steps=[EMAIL, SMS, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "F"})
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["skipped", "skipped", "completed"]
    messages = {m.channel: m for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])}
    assert messages["email"].status == "warning" and "no email address" in messages["email"].error_text
    assert messages["sms"].status == "warning" and "no phone number" in messages["sms"].error_text
    assert messages["in_app"].status == "sent"


async def test_no_integration_fails_and_stop_on_fail_halts(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[{**EMAIL, "shouldStopOnFail": True}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "G"})
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["failed", "canceled"]
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "error" and "No active email integration" in message.error_text


async def test_chat_and_push_go_to_every_subscriber_channel(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peers.install_slack(peer)
    received: list[Any] = []

    def push_hook(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        received.append(request.json())
        return peers.status_answer(200, {"id": "push-1"})(request)

    peer.route("POST", "/push-hook", push_hook)
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    await create_integration(api, providerId="push-webhook", channel="push", active=True, credentials={"webhookUrl": f"{peer.url}/push-hook"})
    subscriber = await create_subscriber(api)
    for provider_id, credentials in (
        ("slack", {"webhookUrl": f"{peer.url}/services/T000/B000/XXXX"}),
        ("push-webhook", {"deviceTokens": ["device-a", "device-b"]}),
    ):
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials", json={"providerId": provider_id, "credentials": credentials}
        )
        assert response.status_code == 200, response.text
    workflow = await create_workflow(
        api,
        steps=[
            {"name": "chat", "template": {"type": "chat", "content": "Deploy {{payload.version}} done"}},
            {"name": "push", "template": {"type": "push", "title": "Deploy", "content": "{{payload.version}} is live"}},
        ],
    )
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"version": "1.2"})
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["completed", "completed"]
    [slack] = peer.requests_to("/services/T000/B000/XXXX")
    assert slack.json()["text"] == "Deploy 1.2 done"
    assert received and "1.2 is live" in str(received[0])
    messages = {m.channel: m for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])}
    assert messages["chat"].status == "sent" and messages["push"].device_tokens == ["device-a", "device-b"]


async def test_chat_without_a_channel_is_a_warning(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker) -> None:
    subscriber = await create_subscriber(api)
    workflow = await create_workflow(api, steps=[{"name": "chat", "template": {"type": "chat", "content": "x"}}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["skipped", "completed"]
    async with app.state.sessionmaker() as session:
        statuses = (await session.execute(select(Job.status).where(Job.transaction_id == result["transactionId"]))).scalars().all()
    assert "failed" not in statuses


async def test_tenant_conditions_pick_the_integration_and_filter_steps(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    """``on: "tenant"`` conditions compare the trigger's tenant: its identifier, name and data."""
    peers.install_twilio(peer, account_sid="AC9", token="tok")
    common = {"accountSid": "AC9", "token": "tok", "baseUrl": peer.url}
    await create_integration(api, providerId="twilio", channel="sms", active=True, credentials={**common, "from": "+1000"})
    european = [
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [
                {"field": "data.region", "value": "eu", "operator": "EQUAL", "on": "tenant"},
                {"field": "name", "value": "Acme", "operator": "EQUAL", "on": "tenant"},
            ],
        }
    ]
    conditional = await create_integration(
        api, providerId="twilio", channel="sms", active=True, conditions=european, credentials={**common, "from": "+4400"}
    )
    assert conditional["conditions"][0]["children"][0]["on"] == "tenant"
    for identifier, name, region in (("acme", "Acme", "eu"), ("globex", "Globex", "eu"), ("initech", "Acme", "us")):
        created = await api.post("/v1/tenants", json={"identifier": identifier, "name": name, "data": {"region": region}})
        assert created.status_code == 201, created.text
    subscriber = await create_subscriber(api, phone="+15550002")
    acme_only = {
        "name": "acme inbox",
        "template": {"type": "in_app", "content": "for acme"},
        "filters": [{"type": "GROUP", "value": "AND", "children": [{"field": "identifier", "value": "acme", "operator": "EQUAL", "on": "tenant"}]}],
    }
    workflow = await create_workflow(api, steps=[SMS, acme_only])
    inbox = []
    for tenant in ("acme", "globex", "initech"):
        result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": tenant}, tenant=tenant)
        await settle(worker, app, result["transactionId"])
        inbox += await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="in_app")
    senders = [request.form_value("From") for request in peer.requests_to("/2010-04-01/Accounts/AC9/Messages.json")]
    assert senders == ["+4400", "+1000", "+1000"]
    assert [message.content for message in inbox] == ["for acme"]


async def test_a_primary_integration_with_conditions_is_still_the_default(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    """As in Novu, the primary sends whenever no override and no matching conditional integration names another."""
    peers.install_twilio(peer, account_sid="AC7", token="tok")
    conditions = [{"type": "GROUP", "value": "AND", "children": [{"field": "identifier", "value": "acme", "operator": "EQUAL", "on": "tenant"}]}]
    only = await create_integration(
        api,
        providerId="twilio",
        channel="sms",
        active=True,
        conditions=conditions,
        credentials={"accountSid": "AC7", "token": "tok", "from": "+1700", "baseUrl": peer.url},
    )
    assert only["primary"]  # the first active sms integration of the environment
    subscriber = await create_subscriber(api, phone="+15550006")
    workflow = await create_workflow(api, steps=[SMS])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "H"})
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed"
    [request] = peer.requests_to("/2010-04-01/Accounts/AC7/Messages.json")
    assert request.form_value("From") == "+1700"


async def test_email_override_picks_another_integration(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    peers.install_sendgrid(peer, api_key="SG.right")
    primary = await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.wrong", "from": "a@example.com", "baseUrl": peer.url})
    backup = await create_integration(
        api, providerId="sendgrid", active=True, identifier="backup-mail", credentials={"apiKey": "SG.right", "from": "b@example.com", "baseUrl": peer.url}
    )
    assert primary["primary"] and not backup["primary"]
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(
        api, name_of(workflow), subscriber["subscriberId"], payload={"order": "I-1"}, overrides={"email": {"integrationIdentifier": "backup-mail"}}
    )
    [job] = await settle(worker, app, result["transactionId"])
    assert job.status == "completed"
    [request] = peer.requests_to("/v3/mail/send")
    assert request.headers["authorization"] == "Bearer SG.right"
    assert request.json()["from"]["email"] == "b@example.com"
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert (message.status, message.provider_id) == ("sent", "sendgrid")
    assert message.provider_message_id and message.provider_message_id.startswith("sg-")
    assert any("backup-mail" in d.detail or d.detail.startswith("Accepted by sendgrid") for d in await details_of(app, result["transactionId"]))


@pytest.mark.parametrize("audience", [1, 2], ids=["alone", "in-a-batch"])
async def test_an_accepted_delivery_is_stored_at_once_so_a_failed_completion_never_sends_it_twice(
    api: httpx.AsyncClient,
    app: FastAPI,
    tenancy: Tenancy,
    worker: Worker,
    peer: HttpPeer,
    monkeypatch: pytest.MonkeyPatch,
    audience: int,
) -> None:
    """The write that completes the job fails after the provider accepted (once per job): the retry does not send again."""
    from herald.engine.runner import JobRunner

    peers.install_sendgrid(peer, api_key="SG.once")
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.once", "from": "a@example.com", "baseUrl": peer.url})
    subscribers = [await create_subscriber(api, email=f"reader{n}@example.com") for n in range(audience)]
    workflow = await create_workflow(api, steps=[EMAIL])
    settle_step, apply_batch = JobRunner._settle, JobRunner._apply_many
    failures = {"left": 2}  # the batch's write (a lone job's too), then the first job's own write

    def fail_once() -> None:
        if failures["left"] > 0:
            failures["left"] -= 1
            raise ConnectionError("the database went away after the send")

    async def failing_settle(self: JobRunner, *args: Any, **kwargs: Any) -> Any:
        fail_once()
        return await settle_step(self, *args, **kwargs)

    async def failing_apply(self: JobRunner, *args: Any, **kwargs: Any) -> Any:
        fail_once()
        return await apply_batch(self, *args, **kwargs)

    # The two writes that complete a step: one job at a time, and a batch at once.
    monkeypatch.setattr(JobRunner, "_settle", failing_settle)
    monkeypatch.setattr(JobRunner, "_apply_many", failing_apply)
    result = await trigger(api, name_of(workflow), [s["subscriberId"] for s in subscribers], payload={"order": "J"})

    jobs = await settle(worker, app, result["transactionId"])

    assert failures["left"] == 0
    assert [job.status for job in jobs] == ["completed"] * audience
    assert max(job.attempts for job in jobs) == 2  # one job was retried
    assert len(peer.requests_to("/v3/mail/send")) == audience
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.email for m in messages) == sorted(s["email"] for s in subscribers)
    assert all(m.status == "sent" and m.provider_message_id for m in messages)
    assert any(d.detail.startswith("Already sent by sendgrid") for d in await details_of(app, result["transactionId"]))


async def test_a_push_channel_without_device_tokens_is_a_warning(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    await create_integration(api, providerId="push-webhook", channel="push", active=True, credentials={"webhookUrl": f"{peer.url}/push-hook"})
    subscriber = await create_subscriber(api)
    response = await api.put(
        f"/v1/subscribers/{subscriber['subscriberId']}/credentials", json={"providerId": "push-webhook", "credentials": {"deviceTokens": []}}
    )
    assert response.status_code == 200, response.text
    workflow = await create_workflow(api, steps=[{"name": "push", "template": {"type": "push", "title": "T", "content": "x"}}, IN_APP])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])
    jobs = await settle(worker, app, result["transactionId"])
    assert [j.status for j in jobs] == ["skipped", "completed"]
    [push] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="push")
    assert push.status == "warning"
    assert push.error_text == f"Subscriber {subscriber['subscriberId']} has no push channel that can be used (push-webhook has no device token)"
    assert peer.requests == []


async def test_a_chat_retry_sends_only_what_may_still_succeed(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    """One channel refused for good, another failed for a while: the retry sends to the second only."""
    peer.route("POST", "/hooks/refuse", peers.status_answer(400, {"error": "no such hook"}))
    answers = iter([peers.status_answer(503, "busy")])

    def busy_once(request: peers.RecordedRequest):  # type: ignore[no-untyped-def]
        return next(answers, peers.status_answer(200, "ok"))(request)

    peer.route("POST", "/services/T1/B1/X1", busy_once)
    await create_integration(api, providerId="chat-webhook", channel="chat", active=True, credentials={})
    await create_integration(api, providerId="slack", channel="chat", active=True, credentials={})
    subscriber = await create_subscriber(api)
    for provider_id, url in (("chat-webhook", f"{peer.url}/hooks/refuse"), ("slack", f"{peer.url}/services/T1/B1/X1")):
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials", json={"providerId": provider_id, "credentials": {"webhookUrl": url}}
        )
        assert response.status_code == 200, response.text
    workflow = await create_workflow(api, steps=[{"name": "chat", "template": {"type": "chat", "content": "Deployed"}}])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])

    [job] = await settle(worker, app, result["transactionId"])

    assert (job.status, job.attempts) == ("failed", 2)
    assert len(peer.requests_to("/hooks/refuse")) == 1
    assert len(peer.requests_to("/services/T1/B1/X1")) == 2
    messages = {m.provider_id: m for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])}
    assert (messages["chat-webhook"].status, messages["slack"].status) == ("error", "sent")
    assert any(d.detail.startswith("Not sent again: it failed for good") for d in await details_of(app, result["transactionId"]))


async def test_a_delivery_that_succeeds_after_an_error_updates_its_message(app: FastAPI, api: httpx.AsyncClient) -> None:
    from herald.engine.repository import EngineRepository
    from herald.kit.ids import new_id
    from herald.models import Message
    from tests.fixtures.builders import insert_in_app_message

    subscriber = await create_subscriber(api)
    job_id = new_id()
    failed = await insert_in_app_message(
        app, subscriber, channel="chat", job_id=job_id, delivery_key="chat:slack:0", status="error", error_id="provider_error_503", error_text="busy"
    )
    retried = Message(
        environment_id=failed.environment_id,
        organization_id=failed.organization_id,
        notification_id=failed.notification_id,
        subscriber_id=failed.subscriber_id,
        transaction_id=failed.transaction_id,
        job_id=job_id,
        delivery_key="chat:slack:0",
        channel="chat",
        content="Hello",
        status="sent",
        provider_id="slack",
        provider_message_id="ts-1",
        delivered_at=["2024-05-01T12:00:00.000Z"],
    )
    async with app.state.sessionmaker() as session, session.begin():
        await EngineRepository(session).save_messages([retried])
    async with app.state.sessionmaker() as session:
        [stored] = (await session.execute(select(Message).where(Message.job_id == job_id))).scalars().all()
    assert (stored.id, stored.status, stored.provider_message_id, stored.error_id, stored.error_text) == (failed.id, "sent", "ts-1", None, None)


async def test_webhook_secrets_stay_out_of_logs_errors_and_answers(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, caplog: pytest.LogCaptureFixture
) -> None:
    """A webhook's path is its credential: sent to, never logged, never in an error text, an execution detail or an answer."""
    import logging

    caplog.set_level(logging.DEBUG)
    delivered, echoed, unsupported = "T000/B000/deliveredSecret01", "api/webhooks/1/echoedSecret02", "unsupportedSecret03"
    peers.install_slack(peer, webhook_path=f"/services/{delivered}")
    # No route for the Discord hook: the peer's 404 names the path it was called at, as some servers do.
    hooks = {
        "slack": f"{peer.url}/services/{delivered}",
        "discord": f"{peer.url}/{echoed}",
        "chat-webhook": f"htp://hooks.example.com/{unsupported}",
    }
    subscriber = await create_subscriber(api)
    for provider_id, url in hooks.items():
        await create_integration(api, providerId=provider_id, channel="chat", active=True, credentials={})
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials", json={"providerId": provider_id, "credentials": {"webhookUrl": url}}
        )
        assert response.status_code == 200, response.text
    workflow = await create_workflow(api, steps=[{"name": "chat", "template": {"type": "chat", "content": "Deployed"}}])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"])

    [job] = await settle(worker, app, result["transactionId"])

    assert job.status == "failed"
    assert len(peer.requests_to(f"/services/{delivered}")) == 1
    assert len(peer.requests_to(f"/{echoed}")) == 1
    messages = {m.provider_id: m for m in await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])}
    assert (messages["slack"].status, messages["discord"].status, messages["chat-webhook"].status) == ("sent", "error", "error")
    assert "answered 404" in messages["discord"].error_text and "unsupported URL" in messages["chat-webhook"].error_text
    recorded = [m.error_text or "" for m in messages.values()] + [m.direct_webhook_url or "" for m in messages.values()]
    recorded += [d.detail + str(d.raw or "") for d in await details_of(app, result["transactionId"])]
    recorded.append(job.error_text or "")
    listed = await api.get("/v1/messages", params={"transactionId": result["transactionId"]})
    activity = await api.get("/v1/notifications", params={"transactionId": result["transactionId"]})
    assert listed.status_code == 200 and activity.status_code == 200
    recorded += [listed.text, activity.text]
    # Captured at DEBUG: the HTTP client's request lines ("HTTP Request: POST <url>") would be here.
    logged = [record.getMessage() for record in caplog.records]
    for secret in ("deliveredSecret01", "echoedSecret02", "unsupportedSecret03"):
        assert not [line for line in logged if secret in line], secret
        assert not [text for text in recorded if secret in text], secret


async def test_a_batch_of_email_steps_reads_its_integrations_once_and_stores_each_delivery_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    """The steps of a claimed batch share one read of the channel's integrations and of their jobs' earlier messages."""
    from tests.engine.conftest import set_aside_other_jobs, statements_while

    peers.install_sendgrid(peer, api_key="SG.batch")
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.batch", "from": "a@example.com", "baseUrl": peer.url})
    subscribers = [await create_subscriber(api, email=f"batch{n}@example.com") for n in range(12)]
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), [s["subscriberId"] for s in subscribers], payload={"order": "B"})

    def kept(statement: str) -> bool:
        text = statement.lstrip().upper()
        return (text.startswith("SELECT") and ("FROM INTEGRATIONS" in text or "FROM MESSAGES" in text)) or text.startswith("INSERT INTO MESSAGES")

    await set_aside_other_jobs(app, tenancy.environment_id)
    sent = await statements_while(app, worker.run_until_idle(), kept)

    reads_of_integrations = [s for s in sent if "FROM INTEGRATIONS" in s.upper()]
    reads_of_messages = [s for s in sent if s.lstrip().upper().startswith("SELECT") and "messages.job_id" in s]
    inserts = [s for s in sent if s.lstrip().upper().startswith("INSERT")]
    assert len(reads_of_integrations) == 1, reads_of_integrations
    assert len(reads_of_messages) == 1, reads_of_messages
    # Each accepted delivery is written once (by its send's group), never again by the batch's final write.
    assert 1 <= len(inserts) <= 12
    assert len(peer.requests_to("/v3/mail/send")) == 12
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.email for m in messages) == sorted(s["email"] for s in subscribers)
    assert all(m.status == "sent" and m.provider_message_id for m in messages)
    assert {job.status for job in await jobs_of(app, result["transactionId"]) if job.kind == "step"} == {"completed"}


async def test_an_accepted_delivery_of_a_job_taken_over_meanwhile_is_left_to_its_new_worker(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the send and its store another worker took one job over: that job's message is not written by this one."""
    from herald.providers.email.sendgrid import SendGridProvider

    peers.install_sendgrid(peer, api_key="SG.lost")
    await create_integration(api, providerId="sendgrid", active=True, credentials={"apiKey": "SG.lost", "from": "a@example.com", "baseUrl": peer.url})
    subscribers = [await create_subscriber(api, email=f"lost{n}@example.com") for n in range(4)]
    workflow = await create_workflow(api, steps=[EMAIL])
    send = SendGridProvider.send
    taken: list[str] = []

    async def send_then_lose_the_first(self: SendGridProvider, message: Any) -> Any:
        answer = await send(self, message)
        if message.to == ["lost0@example.com"]:
            async with app.state.sessionmaker() as session:
                [job] = [
                    j for j in (await session.execute(select(Job).where(Job.step_type == "email", Job.status == "running"))).scalars()
                    if j.subscriber_id == subscribers[0]["_id"]
                ]
                job.locked_by = "another-worker"
                taken.append(job.id)
                await session.commit()
        return answer

    monkeypatch.setattr(SendGridProvider, "send", send_then_lose_the_first)
    result = await trigger(api, name_of(workflow), [s["subscriberId"] for s in subscribers], payload={"order": "L"})
    await worker.run_until_idle()

    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert sorted(m.email for m in messages) == ["lost1@example.com", "lost2@example.com", "lost3@example.com"]
    async with app.state.sessionmaker() as session:
        lost = await session.get(Job, taken[0])
    # The job and what to record of it belong to the worker that holds it now.
    assert (lost.status, lost.locked_by) == ("running", "another-worker")


async def test_a_store_of_accepted_deliveries_cut_short_leaves_no_step_waiting(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The group writer cancelled (the worker stopping): steps waiting on it fail rather than wait for ever."""
    from herald.engine import queue
    from herald.engine.steps.batch import AcceptedDeliveries
    from herald.models import Message

    stuck = asyncio.Event()

    async def hang(*args: Any, **kwargs: Any) -> set[str]:
        stuck.set()
        await asyncio.Event().wait()
        return set()

    monkeypatch.setattr(queue, "lock_held_jobs", hang)
    accepted = AcceptedDeliveries(app.state.sessionmaker, "worker-a")
    first = asyncio.ensure_future(accepted.store("job-1", Message()))
    await asyncio.wait_for(stuck.wait(), 5)
    second = asyncio.ensure_future(accepted.store("job-2", Message()))  # waits for the next group
    assert accepted._writer is not None
    accepted._writer.cancel()
    results = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 5)
    assert all(isinstance(result, BaseException) for result in results), results


# --- at least once, and what providers deduplicate ---------------------------------------------

PUSH = {"name": "push", "template": {"type": "push", "title": "Order", "content": "Order {{payload.order}} shipped"}}


async def keyed_provider(api: httpx.AsyncClient, peer: HttpPeer, provider_id: str) -> tuple[peers.KeyedSends, dict[str, Any], str]:
    """A fake of a provider that takes idempotency keys, the integration that talks to it, a subscriber it reaches, the path."""
    if provider_id == "resend":
        sends, path, channel, credentials = peers.install_resend(peer, api_key="re_key"), "/emails", "email", {"apiKey": "re_key"}
    elif provider_id == "sendinblue":
        sends, path, channel, credentials = peers.install_brevo(peer, api_key="xkeysib-1"), "/v3/smtp/email", "email", {"apiKey": "xkeysib-1"}
    else:
        sends = peers.install_onesignal(peer, app_id="app-1", api_key="os_v2_key", subscribed={"device-1"})
        path, channel, credentials = "/api/v1/notifications", "push", {"applicationId": "app-1", "apiKey": "os_v2_key"}
    await create_integration(
        api, providerId=provider_id, channel=channel, active=True, credentials={**credentials, "from": "a@example.com", "baseUrl": peer.url}
    )
    subscriber = await create_subscriber(api, email="ada@example.com")
    if channel == "push":
        response = await api.put(
            f"/v1/subscribers/{subscriber['subscriberId']}/credentials",
            json={"providerId": provider_id, "credentials": {"deviceTokens": ["device-1"]}},
        )
        assert response.status_code == 200, response.text
    return sends, subscriber, path


@pytest.mark.parametrize("provider_id", ["resend", "sendinblue", "one-signal"])
async def test_a_send_whose_answer_was_lost_is_sent_again_under_the_same_key_and_the_provider_sends_it_once(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer, provider_id: str
) -> None:
    """The provider took the message and its answer was lost (a 502 from its gateway): the retry carries the same key."""
    sends, subscriber, path = await keyed_provider(api, peer, provider_id)
    peers.answer_lost_once(peer, "POST", path)
    workflow = await create_workflow(api, steps=[PUSH if provider_id == "one-signal" else EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "K-1"})

    [job] = await settle(worker, app, result["transactionId"])

    assert (job.status, job.attempts) == ("completed", 2)
    [first, again] = sends.keys
    assert first and first == again
    assert sends.sent == 1
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "sent"
    if provider_id == "sendinblue":
        # Brevo refuses the repeat without the first answer's id: the message is sent, without one.
        assert message.provider_message_id is None
        assert any("did not send it again" in d.detail for d in await details_of(app, result["transactionId"]))
    else:
        [(_, first_answer)] = sends.answers.values()
        assert message.provider_message_id == first_answer["id"]


async def test_two_messages_never_share_a_key(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, peer: HttpPeer
) -> None:
    sends, subscriber, _ = await keyed_provider(api, peer, "resend")
    workflow = await create_workflow(api, steps=[EMAIL, {**EMAIL, "name": "again"}])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "K-2"})
    await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "K-2"})

    await settle(worker, app, result["transactionId"])
    await worker.run_until_idle()

    assert sends.sent == 4 and len(set(sends.keys)) == 4


async def smtp_integration(api: httpx.AsyncClient, smtp: SmtpPeer) -> None:
    await create_integration(
        api,
        providerId="nodemailer",
        active=True,
        credentials={"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
    )


def message_id(mail: peers.ReceivedMail) -> str:
    return str(email.message_from_bytes(mail.data)["Message-ID"])


async def test_an_email_sent_again_keeps_its_message_id_and_a_refusal_leaves_no_doubt(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, smtp: SmtpPeer
) -> None:
    """The server refuses the first attempt after its data (451): the retry carries the same Message-ID, and is no copy."""
    await smtp_integration(api, smtp)
    smtp.defer_data = 1
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "M-1"})

    [job] = await settle(worker, app, result["transactionId"])

    assert (job.status, job.attempts, job.handed_over) == ("completed", 2, None)
    [refused], [accepted] = smtp.deferred, smtp.received
    assert message_id(refused) == message_id(accepted)
    assert message_id(accepted).endswith("@example.com>")
    details = [d.detail for d in await details_of(app, result["transactionId"])]
    assert any("451" in detail for detail in details)
    assert not any("may arrive twice" in detail for detail in details)


async def test_an_email_whose_worker_stopped_after_its_data_is_sent_again_with_the_same_message_id_and_said_so(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, smtp: SmtpPeer
) -> None:
    """The server has the data and its answer is held when the worker stops: the next worker knows, and sends it again."""
    await smtp_integration(api, smtp)
    smtp.hold_data = threading.Event()
    subscriber = await create_subscriber(api, email="ada@example.com")
    workflow = await create_workflow(api, steps=[EMAIL])
    result = await trigger(api, name_of(workflow), subscriber["subscriberId"], payload={"order": "M-2"})
    first = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    second = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        running = asyncio.ensure_future(first.run_until_idle())
        while not smtp.received:
            assert not running.done(), running
            await asyncio.sleep(0.01)
        [job] = [j for j in await jobs_of(app, result["transactionId"]) if j.kind == "step"]
        # Written before the send began: this attempt handed the email over.
        assert (job.status, job.attempts, job.handed_over) == ("running", 1, 1)
        running.cancel()  # the worker stops there, before the server's answer
        with contextlib.suppress(asyncio.CancelledError):
            await running
        async with app.state.sessionmaker() as session, session.begin():
            await session.execute(update(Job).where(Job.id == job.id).values(locked_until=utcnow() - timedelta(seconds=1)))
        smtp.hold_data.set()
        await second.runner.take_back_from_dead_workers()
        [job] = await settle(second, app, result["transactionId"])
    finally:
        smtp.hold_data.set()
        for engine_worker in (first, second):
            await engine_worker.http.aclose()

    assert (job.status, job.attempts, job.handed_over) == ("completed", 2, None)
    assert len(smtp.received) == 2
    assert message_id(smtp.received[0]) == message_id(smtp.received[1])
    [message] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    assert message.status == "sent"
    [warning] = [d for d in await details_of(app, result["transactionId"]) if "may arrive twice" in d.detail]
    assert warning.status == "Warning" and warning.detail.startswith("Attempt 1 began sending this email to its SMTP server")
