"""Live: a notification triggered while the page is open reaches Novu's ``<Inbox />`` through Herald's socket.

The page is loaded and the Inbox opened first; only then is the workflow
triggered through Herald's API. What the page shows next can only have come
over the socket (``notification_received``, ``unread_count_changed``): the
client does not poll, and a marker set in ``window`` before the trigger shows
the page was not reloaded. The trigger waits until Herald reports the
subscriber online (its socket joined), so a notification cannot be stored
before the socket that should hear it is there.

On SQLite the API and its worker are one process. On PostgreSQL two API
processes (``herald serve --no-worker``) and two ``herald worker`` processes
share one fresh database: the page talks to the first API process, the trigger
goes to the second, a worker process stores the message, and the first API
process hears of it through PostgreSQL (NOTIFY/LISTEN).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.conftest import HeraldServer, InboxPage, missing
from tests.browser.test_inbox import ORDERS, WAIT_MS, notified, open_popover
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.fixtures.stores import create_postgres_database, postgres_reachable

MARKER = "window.heraldLoadedOnce"
# Small pools: the processes share the PostgreSQL server with other test runs.
PROCESS_ENV = {"HERALD_DATABASE_POOL_SIZE": "4"}


async def new_order_workflow(api: httpx.AsyncClient, name: str) -> dict[str, Any]:
    return await create_workflow(
        api,
        name=name,
        steps=[
            {
                "name": "inbox",
                "template": {
                    "type": "in_app",
                    "subject": "Order {{payload.order}}",
                    "content": "Your order {{payload.order}} has shipped",
                },
            }
        ],
    )


async def trigger(api: httpx.AsyncClient, workflow: dict[str, Any], subscriber_id: str, order: str) -> None:
    response = await api.post(
        "/v1/events/trigger",
        json={"name": workflow["triggers"][0]["identifier"], "to": subscriber_id, "payload": {"order": order}},
    )
    assert response.status_code == 201, response.text
    assert response.json()["data"]["status"] == "processed", response.text


async def wait_online(api: httpx.AsyncClient, subscriber_id: str, describe: Callable[[], str] | None = None) -> None:
    """Herald marks a subscriber online once their socket joined its room: from then on a new message reaches it."""

    async def online() -> bool:
        response = await api.get(f"/v1/subscribers/{subscriber_id}")
        assert response.status_code == 200, response.text
        return response.json()["data"]["isOnline"] is True

    await wait_until(
        online,
        timeout=WAIT_MS / 1000,
        what=f"Herald to have {subscriber_id} online (the page's socket)",
        describe=describe,
    )


async def mark_loaded(inbox: InboxPage) -> None:
    """A marker in the page's window: a reload or a navigation would lose it."""
    await inbox.page.evaluate(f"{MARKER} = true")


async def assert_not_reloaded(inbox: InboxPage) -> None:
    assert await inbox.page.evaluate(f"{MARKER} === true"), "the page was reloaded or navigated away"


async def test_a_notification_triggered_after_the_page_loaded_appears_without_a_reload(
    herald_server: HeraldServer, open_inbox: Any
) -> None:
    async with herald_server.api() as api:
        workflow, subscriber = await notified(api, "Live orders")
        subscriber_id = subscriber["subscriberId"]
        inbox = await open_inbox(subscriber_id)
        page = inbox.page
        await expect(page.get_by_test_id("unread-count")).to_have_text(str(len(ORDERS)), timeout=WAIT_MS)
        await open_popover(inbox)
        await wait_online(api, subscriber_id)
        await mark_loaded(inbox)

        await trigger(api, workflow, subscriber_id, "A-3")
        # Novu's open list announces what arrived over the socket, and the bell counts it.
        notice = page.locator(".nv-notificationListNewNotificationsNotice__button")
        await expect(notice).to_have_text("1 new notification", timeout=WAIT_MS)
        await expect(page.get_by_test_id("unread-count")).to_have_text(str(len(ORDERS) + 1), timeout=WAIT_MS)
        # The notice shows it in the list, newest first, in the same page.
        await notice.click()
        await expect(page.locator(".nv-notificationSubject")).to_have_text(
            ["Order A-3", "Order A-2", "Order A-1"], timeout=WAIT_MS
        )
        await assert_not_reloaded(inbox)


@pytest.fixture(scope="module")
async def herald_scaled_out(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[HeraldServer, HeraldServer]]:
    """Two ``herald serve --no-worker`` and two ``herald worker`` on one fresh PostgreSQL database."""
    if not await postgres_reachable():
        missing("PostgreSQL (set HERALD_TEST_POSTGRES_URL) for two API processes and two workers on one database")
    database = await create_postgres_database()
    root = tmp_path_factory.mktemp("herald-browser-postgres")
    launcher = HeraldProcesses(database_url=database.url, data_dir=root / "data", log_dir=root / "logs")
    try:
        launcher.migrate()
        boot = launcher.bootstrap()
        development = next(env for env in boot["environments"] if env["name"] == "Development")
        apis = await asyncio.gather(*(launcher.serve(worker=False, **PROCESS_ENV) for _ in range(2)))
        await asyncio.gather(*(launcher.worker(**PROCESS_ENV) for _ in range(2)))
        first, second = (
            HeraldServer(
                url=api.url or "",
                api_key=development["apiKey"],
                application_identifier=development["applicationIdentifier"],
                launcher=launcher,
            )
            for api in apis
        )
        yield first, second
    finally:
        launcher.stop_all()
        await database.drop()


async def test_the_live_event_arrives_with_two_api_processes_and_two_workers_on_postgresql(
    herald_scaled_out: tuple[HeraldServer, HeraldServer], open_page: Any
) -> None:
    page_api, trigger_api = herald_scaled_out
    async with trigger_api.api() as api:
        workflow = await new_order_workflow(api, "Live orders across processes")
        subscriber = await create_subscriber(api)
        subscriber_id = subscriber["subscriberId"]
        # The page's Inbox talks to the first API process only (apiUrl and socketUrl).
        inbox = await open_page(page_api, subscriber_id)
        page = inbox.page
        await expect(page.get_by_test_id("unread-count")).to_have_text("0", timeout=WAIT_MS)
        await page.get_by_test_id("bell").click()
        await wait_online(api, subscriber_id, describe=page_api.launcher.describe)
        await mark_loaded(inbox)

        await trigger(api, workflow, subscriber_id, "B-1")
        # An empty open list takes the socket's notification as it is: subject and body from notification_received.
        item = page.locator(".nv-notification")
        await expect(item.locator(".nv-notificationSubject")).to_have_text(["Order B-1"], timeout=WAIT_MS)
        await expect(item.locator(".nv-notificationBody")).to_have_text(["Your order B-1 has shipped"], timeout=WAIT_MS)
        await expect(page.get_by_test_id("unread-count")).to_have_text("1", timeout=WAIT_MS)
        await assert_not_reloaded(inbox)
    page_api.launcher.check_alive()
