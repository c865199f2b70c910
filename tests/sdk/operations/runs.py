"""Notifications the real engine made, for the operations that read or change what a run left."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from herald.app import build_worker
from herald.models import Message
from tests.fixtures.builders import create_subscriber, create_workflow


async def run_worker(app: FastAPI) -> None:
    """Run the engine over everything queued (the test server runs no worker of its own)."""
    worker = build_worker(replace(app.state.settings, retry_base_seconds=0.01), app.state.sessionmaker)
    try:
        await worker.run_until_idle()
    finally:
        if worker.http is not None:
            await worker.http.aclose()


@dataclass
class Run:
    workflow: dict[str, Any]
    subscriber: dict[str, Any]
    transaction_id: str
    messages: list[Message]

    @property
    def subscriber_id(self) -> str:
        return str(self.subscriber["subscriberId"])


async def in_app_run(api: httpx.AsyncClient, app: FastAPI, count: int = 1, **workflow: Any) -> Run:
    """``count`` in-app messages the engine made for one fresh subscriber, of one transaction each (the last one's named)."""
    made = await create_workflow(api, **workflow)
    subscriber = await create_subscriber(api)
    transaction_id = ""
    for index in range(count):
        response = await api.post(
            "/v1/events/trigger",
            json={
                "name": made["triggers"][0]["identifier"],
                "to": subscriber["subscriberId"],
                "payload": {"name": f"Ada {index}"},
            },
        )
        assert response.status_code == 201, response.text
        transaction_id = response.json()["data"]["transactionId"]
    await run_worker(app)
    async with app.state.sessionmaker() as session:
        rows = await session.execute(
            select(Message).where(Message.subscriber_id == subscriber["_id"]).order_by(Message.created_at, Message.id)
        )
        messages = list(rows.scalars())
    assert len(messages) == count * len(made["steps"]), messages
    return Run(workflow=made, subscriber=subscriber, transaction_id=transaction_id, messages=messages)
