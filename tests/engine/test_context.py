"""A trigger's context reaches its messages as contextKeys ("type:id")."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from herald.engine.worker import Worker
from tests.conftest import Tenancy
from tests.engine.conftest import messages_of, trigger
from tests.fixtures.builders import create_subscriber, create_workflow


async def test_messages_carry_the_triggers_context_keys(
    api: httpx.AsyncClient, app: FastAPI, worker: Worker, tenancy: Tenancy
) -> None:
    await create_subscriber(api, subscriberId="ada")
    workflow = await create_workflow(api)
    name = workflow["triggers"][0]["identifier"]
    with_context = await trigger(
        api, name, "ada", context={"tenant": "acme", "app": {"id": "jira", "data": {"plan": "pro"}}}
    )
    without_context = await trigger(api, name, "ada")
    await worker.run_until_idle()

    [message] = await messages_of(app, tenancy.environment_id, transaction_id=with_context["transactionId"])
    assert message.context_keys == ["app:jira", "tenant:acme"]
    [plain] = await messages_of(app, tenancy.environment_id, transaction_id=without_context["transactionId"])
    assert plain.context_keys == []
    # The feed answers them as Novu's Message.contextKeys.
    feed = (await api.get("/v1/messages", params={"transactionId": with_context["transactionId"]})).json()["data"]
    assert [item["contextKeys"] for item in feed] == [["app:jira", "tenant:acme"]]
