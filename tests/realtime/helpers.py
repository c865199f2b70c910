"""A socket client as @novu/js 3.19 opens it: socket.io, websocket transport, the session token in the query."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlencode

import httpx
import socketio

EVENTS = ("notification_received", "unseen_count_changed", "unread_count_changed")


class InboxSocket:
    """One socket of one subscriber, keeping every event it receives in order."""

    def __init__(self) -> None:
        self.client = socketio.AsyncClient(reconnection=False)
        self.events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        for name in EVENTS:
            self.client.on(name, self._keeper(name))

    def _keeper(self, name: str) -> Any:
        async def keep(data: Any) -> None:
            await self.events.put((name, data))

        return keep

    async def connect(self, base_url: str, token: str) -> None:
        # As @novu/js: io(socketUrl, {transports: ['websocket'], query: {token}}).
        await self.client.connect(f"{base_url}?{urlencode({'token': token})}", transports=["websocket"], wait_timeout=10)

    async def next(self, name: str, timeout: float = 10.0) -> Any:
        """The next event called ``name`` (others before it are skipped)."""
        async with asyncio.timeout(timeout):
            while True:
                got, data = await self.events.get()
                if got == name:
                    return data

    async def nothing_within(self, seconds: float) -> list[tuple[str, Any]]:
        await asyncio.sleep(seconds)
        seen = []
        while not self.events.empty():
            seen.append(self.events.get_nowait())
        return seen

    async def close(self) -> None:
        if self.client.connected:
            await self.client.disconnect()


async def session_token(base_url: str, application_identifier: str, subscriber_id: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=base_url) as client:
        response = await client.post(
            "/v1/inbox/session",
            json={"applicationIdentifier": application_identifier, "subscriber": {"subscriberId": subscriber_id}},
        )
    assert response.status_code == 201, response.text
    return dict(response.json()["data"])
