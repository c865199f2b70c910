"""The Activity page and a run's page, in process: search, filters, keyset pages, the why of a run, scoping.

Runs are written straight to the store (tests/notifications/test_routes.record_run), as the engine
writes them; the browser tests (tests/browser/console/test_activity.py) run the real worker.
"""

from __future__ import annotations

import hashlib
import html
import re
from base64 import b64encode
from datetime import timedelta
from typing import Any

import httpx
from fastapi import FastAPI

from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Message
from herald.notifications import service
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow, unique
from tests.fixtures.console import ConsoleAs
from tests.notifications.test_routes import TWO_CHANNEL_STEPS, record_run


def style_hash(style: str) -> str:
    return "sha256-" + b64encode(hashlib.sha256(style.encode()).digest()).decode()


RUN_ROW = re.compile(r'<tr data-run="([0-9a-f]+)" data-status="(\w+)">')


def runs_of(page: httpx.Response) -> list[str]:
    assert page.status_code == 200, page.text
    return [run_id for run_id, _ in RUN_ROW.findall(page.text)]


async def scene(api: httpx.AsyncClient) -> dict[str, Any]:
    workflow = await create_workflow(api, steps=TWO_CHANNEL_STEPS)
    other = await create_workflow(api, steps=[TWO_CHANNEL_STEPS[0]])
    ada = await create_subscriber(api, subscriberId=unique("ada"), email=f"{unique('ada')}@example.com", phone="+15550100")
    bob = await create_subscriber(api, subscriberId=unique("bob"), email=f"{unique('bob')}@example.com")
    return {"workflow": workflow, "other": other, "ada": ada, "bob": bob}


async def test_runs_are_listed_newest_first_with_workflow_subscriber_channels_and_status(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    found = await scene(api)
    now = utcnow()
    old = await record_run(app, found["workflow"], found["ada"], created_at=now - timedelta(minutes=5))
    failed = await record_run(
        app, found["workflow"], found["bob"], created_at=now - timedelta(minutes=1), statuses=["completed", "failed"]
    )
    pending = await record_run(app, found["other"], found["ada"], created_at=now, statuses=["queued"])
    viewer = await console_as("viewer")

    page = await viewer.get("/console/activity")

    assert runs_of(page) == [pending["notification_id"], failed["notification_id"], old["notification_id"]]
    assert RUN_ROW.findall(page.text) == [
        (pending["notification_id"], "pending"),
        (failed["notification_id"], "failed"),
        (old["notification_id"], "completed"),
    ]
    text = html.unescape(page.text)
    assert found["workflow"]["name"] in text and found["bob"]["subscriberId"] in text
    assert "Email, In-app" in text
    assert 'data-live-events="/console/live/activity"' in page.text
    assert '<label for="search">Search</label>' in page.text


async def test_search_finds_runs_by_subscriber_id_email_phone_and_transaction_id(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    found = await scene(api)
    ada_run = await record_run(app, found["workflow"], found["ada"])
    bob_run = await record_run(app, found["workflow"], found["bob"])
    viewer = await console_as("viewer")

    async def search(term: str) -> list[str]:
        return runs_of(await viewer.get("/console/activity", params={"search": term}))

    assert await search(found["ada"]["subscriberId"]) == [ada_run["notification_id"]]
    assert await search(found["ada"]["email"]) == [ada_run["notification_id"]]
    assert await search(found["ada"]["email"].upper()) == [ada_run["notification_id"]]
    assert await search("+15550100") == [ada_run["notification_id"]]
    assert await search(bob_run["transaction_id"]) == [bob_run["notification_id"]]
    empty = await viewer.get("/console/activity", params={"search": "nobody-at-all"})
    assert runs_of(empty) == [] and "No runs match these filters" in empty.text


async def test_filters_by_workflow_channel_status_and_time(app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    found = await scene(api)
    now = utcnow()
    two_channels = await record_run(app, found["workflow"], found["ada"], statuses=["completed", "failed"])
    in_app_only = await record_run(app, found["other"], found["ada"], statuses=["queued"])
    last_week = await record_run(app, found["other"], found["bob"], created_at=now - timedelta(days=3))
    viewer = await console_as("viewer")

    async def listed(**params: str) -> list[str]:
        return runs_of(await viewer.get("/console/activity", params=params))

    assert await listed(workflow=found["workflow"]["_id"]) == [two_channels["notification_id"]]
    assert await listed(channel="email") == [two_channels["notification_id"]]
    assert await listed(status="failed") == [two_channels["notification_id"]]
    assert await listed(status="pending") == [in_app_only["notification_id"]]
    assert await listed(status="completed") == [last_week["notification_id"]]
    assert await listed(since="24h") == [in_app_only["notification_id"], two_channels["notification_id"]]
    assert await listed(since="7d", workflow=found["other"]["_id"]) == [in_app_only["notification_id"], last_week["notification_id"]]

    wrong = await viewer.get("/console/activity", params={"status": "exploded", "channel": "pigeon"})
    assert wrong.status_code == 422
    assert "Choose a status from the list" in wrong.text and "Choose a channel from the list" in wrong.text


async def test_pages_are_keyset_bounded_and_older_runs_follow(app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    found = await scene(api)
    now = utcnow()
    # Same instant for two runs: the id orders them, and none is shown twice or lost between pages.
    runs = [
        await record_run(app, found["workflow"], found["ada"], created_at=now - timedelta(seconds=index // 2))
        for index in range(53)
    ]
    viewer = await console_as("viewer")

    first = await viewer.get("/console/activity")
    first_ids = runs_of(first)
    assert len(first_ids) == 50
    older = re.search(r'<a href="([^"]+)" rel="next">Older runs</a>', first.text)
    assert older is not None
    second = await viewer.get(html.unescape(older.group(1)))
    second_ids = runs_of(second)
    assert sorted(first_ids + second_ids) == sorted(run["notification_id"] for run in runs)
    assert 'rel="next"' not in second.text and "Newest runs" in second.text
    # Older pages are not live: they would move under their reader.
    assert "data-live-events" not in second.text


async def test_the_rows_fragment_is_the_first_page_with_the_filters(app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    found = await scene(api)
    ada_run = await record_run(app, found["workflow"], found["ada"])
    await record_run(app, found["workflow"], found["bob"])
    viewer = await console_as("viewer")

    fragment = await viewer.get("/console/activity/rows", params={"search": found["ada"]["subscriberId"]})

    assert fragment.status_code == 200
    assert fragment.headers["cache-control"] == "no-store"
    assert RUN_ROW.findall(fragment.text) == [(ada_run["notification_id"], "completed")]
    assert "<html" not in fragment.text


async def test_a_runs_page_says_why_a_delivery_failed_and_shows_the_email_as_rendered(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    found = await scene(api)
    run = await record_run(
        app,
        found["workflow"],
        found["ada"],
        payload={"name": "Ada", "order": {"id": 42}},
        statuses=["completed", "failed"],
        details={
            0: [{"status": "Success", "detail": "Message created", "source": "Internal"}],
            1: [
                {"status": "Queued", "detail": "Step mail queued; attempt 1", "source": "Internal"},
                {"status": "Failed", "detail": "Delivery failed: 550 mailbox unavailable", "source": "Internal", "provider_id": "smtp", "raw": {"code": 550}},
            ],
        },
    )
    async with app.state.sessionmaker() as session:
        session.add(
            Message(
                id=new_id(),
                environment_id=found["ada"]["_environmentId"],
                organization_id=found["ada"]["_organizationId"],
                notification_id=run["notification_id"],
                subscriber_id=found["ada"]["_id"],
                job_id=run["job_ids"][1],
                transaction_id=run["transaction_id"],
                channel="email",
                subject="Your order",
                content='<style>p { margin: 0 }</style><p style="color: #333">Hello Ada</p><script>alert("x")</script>',
                email=found["ada"]["email"],
                status="error",
                error_text="550 mailbox unavailable",
            )
        )
        await session.commit()
    viewer = await console_as("viewer")

    page = await viewer.get(f"/console/activity/{run['notification_id']}")

    assert page.status_code == 200, page.text
    text = html.unescape(page.text)
    assert run["transaction_id"] in text
    why = text[text.index("What happened") : text.index("<h2>Steps</h2>")]
    assert "Step 2: Email (mail): failed." in why and "Delivery failed: 550 mailbox unavailable" in why
    # Each step's details, in order.
    steps = text[text.index("<h2>Steps</h2>") :]
    assert steps.index("Step mail queued; attempt 1") < steps.index("Delivery failed: 550 mailbox unavailable")
    # The email is shown in a sandbox that runs no script, its HTML escaped into srcdoc.
    iframe = re.search(r"<iframe [^>]*>", page.text)
    assert iframe is not None
    assert ' sandbox ' in iframe.group(0) and "allow-scripts" not in iframe.group(0)
    assert "&lt;p style=&#34;color: #333&#34;&gt;Hello Ada&lt;/p&gt;&lt;script&gt;" in iframe.group(0)
    # The frame keeps the page's policy: the email's own styles are allowed by their hashes, nothing else.
    policy = page.headers["content-security-policy"]
    assert f"style-src 'self' 'unsafe-hashes' '{style_hash('p { margin: 0 }')}' '{style_hash('color: #333')}';" in policy
    assert "script-src 'self';" in policy and "unsafe-inline" not in policy
    assert "unsafe-hashes" not in (await viewer.get("/console/activity")).headers["content-security-policy"]
    assert '"order": {\n    "id": 42\n  }' in text


async def test_a_runs_page_names_skipped_held_throttled_and_failed_over_steps(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    steps = [
        {"name": "text", "template": {"type": "sms", "content": "Hi"}},
        {"name": "mail", "template": {"type": "email", "subject": "Hi", "content": "Hi"}},
        {"name": "reminder", "template": {"type": "email", "subject": "Still there?", "content": "Hi"}},
        {"name": "limit", "template": {"type": "throttle"}, "metadata": {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 1}},
    ]
    found = await scene(api)
    workflow = await create_workflow(api, steps=steps)
    run = await record_run(
        app,
        workflow,
        found["bob"],
        statuses=["skipped", "completed", "delayed", "canceled"],
        details={
            0: [{"status": "Warning", "detail": "Subscriber bob has no phone number; the sms step was not sent", "source": "Internal"}],
            1: [
                {"status": "Failed", "detail": "primary (sendgrid) failed, moving on: 503", "source": "Internal"},
                {"status": "Success", "detail": "Accepted by ses through backup (failover) (id 1)", "source": "Internal"},
            ],
            2: [{"status": "Pending", "detail": "Held by the subscriber's delivery schedule until 2026-11-30T08:00:00Z (Europe/Paris)", "source": "Internal"}],
            3: [{"status": "Warning", "detail": "Throttled: 2 of 1 in the window", "source": "Internal"}],
        },
    )
    viewer = await console_as("viewer")

    text = html.unescape((await viewer.get(f"/console/activity/{run['notification_id']}")).text)

    why = text[text.index("What happened") : text.index("<h2>Steps</h2>")]
    assert "Step 1: SMS (text): skipped.</strong> Subscriber bob has no phone number" in why
    assert "failed over.</strong> primary (sendgrid) failed, moving on: 503; Accepted by ses through backup (failover)" in why
    assert "Step 3: Email (reminder): held.</strong> Held by the subscriber's delivery schedule" in why
    assert "throttled.</strong> Throttled: 2 of 1" in why


async def test_runs_are_scoped_to_the_chosen_environment(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, tenancy: Tenancy, console_as: ConsoleAs
) -> None:
    found = await scene(api)
    development_run = await record_run(app, found["workflow"], found["ada"])
    production_workflow = await create_workflow(production_api, steps=TWO_CHANNEL_STEPS)
    production_subscriber = await create_subscriber(production_api, subscriberId=unique("pat"))
    production_run = await record_run(app, production_workflow, production_subscriber)
    viewer = await console_as("viewer")

    assert runs_of(await viewer.get("/console/activity")) == [development_run["notification_id"]]
    other = await viewer.get(f"/console/activity/{production_run['notification_id']}")
    assert other.status_code == 404
    await viewer.post_form("/console/environment", {"environment": tenancy.production_environment_id, "next": "/console/activity"})
    assert runs_of(await viewer.get("/console/activity")) == [production_run["notification_id"]]


async def test_every_role_reads_activity_and_a_signed_out_browser_is_sent_to_sign_in(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, anonymous_console: Any
) -> None:
    found = await scene(api)
    run = await record_run(app, found["workflow"], found["ada"])
    for role in ("viewer", "author", "admin", "owner"):
        member = await console_as(role)
        assert runs_of(await member.get("/console/activity")) == [run["notification_id"]]
        assert (await member.get(f"/console/activity/{run['notification_id']}")).status_code == 200
    response = await anonymous_console.get("/console/activity")
    assert response.status_code == 303 and "/console/sign-in" in response.headers["location"]
    assert (await anonymous_console.get("/console/live/activity")).status_code in (303, 401)


async def test_a_status_filter_looks_through_a_bounded_window_and_older_runs_go_further_back(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, monkeypatch: Any
) -> None:
    # Five runs per window: each page checks the status of five runs at most, whatever the history holds.
    monkeypatch.setattr(service, "ACTIVITY_SCAN", 5)
    found = await scene(api)
    now = utcnow()
    failed_recent = await record_run(app, found["workflow"], found["ada"], created_at=now - timedelta(seconds=1), statuses=["completed", "failed"])
    for index in range(2, 9):
        await record_run(app, found["workflow"], found["ada"], created_at=now - timedelta(seconds=index))
    failed_old = await record_run(app, found["workflow"], found["bob"], created_at=now - timedelta(seconds=20), statuses=["failed", "completed"])
    viewer = await console_as("viewer")

    first = await viewer.get("/console/activity", params={"status": "failed"})
    assert runs_of(first) == [failed_recent["notification_id"]]
    assert "looks through 5 runs at a time" in first.text
    pages = [first]
    while (older := re.search(r'<a href="([^"]+)" rel="next">Older runs</a>', pages[-1].text)) is not None:
        pages.append(await viewer.get(html.unescape(older.group(1))))
        assert len(pages) < 5
    assert [run for page in pages for run in runs_of(page)] == [failed_recent["notification_id"], failed_old["notification_id"]]


async def test_a_runs_page_cuts_a_long_payload_and_a_long_search_is_cut_too(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    found = await scene(api)
    run = await record_run(app, found["workflow"], found["ada"], payload={"notes": "x" * 30_000})
    viewer = await console_as("viewer")

    page = await viewer.get(f"/console/activity/{run['notification_id']}")

    assert page.status_code == 200
    payload = html.unescape(page.text.split('<pre class="payload" tabindex="0"><code>')[1].split("</code>")[0])
    assert payload.startswith('{\n  "notes": "xxx')
    assert re.search(r"… \(cut: [\d,]+ more characters\)$", payload)
    assert len(payload) < 20_100
    listed = await viewer.get("/console/activity", params={"search": "y" * 5_000})
    assert listed.status_code == 200 and runs_of(listed) == []
    assert f'value="{"y" * 320}"' in listed.text and "y" * 321 not in listed.text
