"""Across processes on PostgreSQL: a message a `herald worker` process makes reaches the socket an API process holds.

The API runs as ``herald serve --no-worker`` and the worker as ``herald
worker``, each its own process: the only way between them is the database
(NOTIFY herald_realtime in the worker's transaction, LISTEN in the API).
"""

from __future__ import annotations

from sqlalchemy import select

from herald.models import Environment
from tests.fixtures.processes import HeraldProcesses
from tests.processes.conftest import IN_APP, ProcessStore, api_client, create, herald, store, trigger  # noqa: F401
from tests.realtime.helpers import InboxSocket, session_token


async def test_a_worker_process_reaches_the_socket_an_api_process_holds(store: ProcessStore, herald: HeraldProcesses) -> None:  # noqa: F811
    api = await herald.serve(worker=False)
    url = api.url or ""
    async with store.sessionmaker() as session:
        identifier = (
            await session.execute(select(Environment.identifier).where(Environment.id == store.environment_id))
        ).scalar_one()
    async with api_client(url, store.api_key) as client:
        workflow = await create(client, "/v1/workflows", {"name": "realtime across processes", "active": True, "steps": [IN_APP]})
        ada = await create(client, "/v1/subscribers", {"subscriberId": "ada-across"})
        bob = await create(client, "/v1/subscribers", {"subscriberId": "bob-across"})
        ada_socket, bob_socket = InboxSocket(), InboxSocket()
        try:
            await ada_socket.connect(url, (await session_token(url, identifier, ada["subscriberId"]))["token"])
            await bob_socket.connect(url, (await session_token(url, identifier, bob["subscriberId"]))["token"])
            # No worker yet: the API process makes no message itself.
            await trigger(client, workflow, ada["subscriberId"])
            assert await ada_socket.nothing_within(1.0) == []

            await herald.worker()
            received = await ada_socket.next("notification_received", timeout=30)
            assert received["message"]["content"] == "Hello ada-across"
            assert received["message"]["subscriber"]["subscriberId"] == "ada-across"
            assert (await ada_socket.next("unread_count_changed"))["unreadCount"] == 1
            assert await bob_socket.nothing_within(0.5) == []
        finally:
            await ada_socket.close()
            await bob_socket.close()
