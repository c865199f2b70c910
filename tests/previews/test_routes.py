"""Previews render off the event loop in a bounded pool, charged to the environment (herald/previews/service.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.kit.limits import PREVIEW_COST, RATE_LIMITED_MESSAGE
from herald.previews import service as previews
from tests.conftest import Tenancy, assert_error, make_client
from tests.fixtures.builders import create_workflow
from tests.kit.test_limits import limited  # noqa: F401 (a fixture)
from tests.layouts.test_routes import create_v2

HEAVY = {"name": "inbox", "template": {"type": "in_app", "content": "{% for i in (1..3000) %}{{ i }}{% endfor %}"}}


class HeldRenders:
    """Holds each preview render in its thread until released, and writes down what happens, in order."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.events: list[str] = []
        self.started = asyncio.Event()
        self.release = threading.Event()
        self.queued = 0
        self.all_queued = asyncio.Event()
        self.expected = previews.MAX_PREVIEWS_PER_ENVIRONMENT

    def count(self, render: Callable[..., Any]) -> Callable[..., Any]:
        async def counted(environment_id: str, *args: Any) -> Any:
            self.queued += 1
            if self.queued == self.expected:
                self.all_queued.set()
            return await render(environment_id, *args)

        return counted

    def hold(self, render: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any) -> Any:
            self.loop.call_soon_threadsafe(self.events.append, "render started")
            self.loop.call_soon_threadsafe(self.started.set)
            # A bound on the wait only so that a failing test ends; released long before.
            self.release.wait(timeout=60)
            try:
                return render(*args)
            finally:
                self.loop.call_soon_threadsafe(self.events.append, "render finished")

        return held


@pytest.fixture
async def held(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[HeldRenders]:
    renders = HeldRenders(asyncio.get_running_loop())
    monkeypatch.setattr(previews, "_render_step", renders.hold(previews._render_step))
    monkeypatch.setattr(previews, "_render_layout", renders.hold(previews._render_layout))
    monkeypatch.setattr(previews.pool, "render", renders.count(previews.pool.render))
    try:
        yield renders
    finally:
        renders.release.set()


async def test_previews_render_off_the_loop_in_a_bounded_pool_while_the_api_answers(
    app: FastAPI, api: httpx.AsyncClient, production_api: httpx.AsyncClient, held: HeldRenders
) -> None:
    workflow = await create_workflow(api, steps=[HEAVY])
    layout = await create_v2(api)
    path = f"/v2/workflows/{workflow['_id']}/step/inbox/preview"
    # As many heavy previews as an environment may have at once: the pool renders one, the other waits for it.
    under_way = [
        asyncio.create_task(api.post(path, json={})) for _ in range(previews.MAX_PREVIEWS_PER_ENVIRONMENT)
    ]
    await held.all_queued.wait()
    await held.started.wait()

    # While a preview is provably rendering (held in its thread), the API answers on its loop.
    anonymous = make_client(app)
    async with anonymous:
        health = await anonymous.get("/v1/health-check")
    held.events.append(f"health answered {health.status_code}")
    # One preview more for the environment, a layout's too, is refused at once; another environment's is not.
    for refused in (await api.post(path, json={}), await api.post(f"/v2/layouts/{layout['layoutId']}/preview", json={})):
        assert_error(refused, 429, previews.BUSY_MESSAGE)
    held.events.append("third refused")
    other = asyncio.create_task(production_api.post("/v2/layouts/none/preview", json={}))
    assert (await other).status_code == 404  # no such layout there: answered without waiting for the pool
    assert not any(task.done() for task in under_way)
    assert held.events == ["render started", "health answered 200", "third refused"]

    held.release.set()
    answers = await asyncio.gather(*under_way)
    assert [answer.status_code for answer in answers] == [201] * len(answers), [a.text for a in answers]
    assert answers[0].json()["data"]["result"]["preview"]["body"].startswith("123456789"), answers[0].text[-400:]
    # The pool rendered one preview at a time, the second after the first.
    assert held.events[3:] == ["render finished", "render started", "render finished"]
    assert previews.pool.under_way == {}


async def test_a_preview_is_charged_to_the_environments_rate_limit(
    limited: Callable[..., Any],  # noqa: F811
) -> None:
    async with limited(rate_limit_requests=2 * PREVIEW_COST + 3) as (app, tenancy, _clock):
        assert isinstance(tenancy, Tenancy)
        async with make_client(app, tenancy.api_key) as api, make_client(app, tenancy.production_api_key) as production:
            workflow = await create_workflow(api)  # 1 token
            path = f"/v2/workflows/{workflow['_id']}/step/inbox/preview"
            first = await api.post(path, json={})
            assert first.status_code == 201, first.text
            assert first.headers["ratelimit-remaining"] == str(2 * PREVIEW_COST + 3 - 1 - PREVIEW_COST)
            assert 'cost="preview"' in first.headers["ratelimit-policy"]
            assert (await api.post(path, json={})).status_code == 201
            # Two tokens left: not a preview's worth, but a read's.
            assert_error(await api.post(path, json={}), 429, RATE_LIMITED_MESSAGE)
            assert (await api.get(f"/v2/workflows/{workflow['_id']}")).status_code == 200
            # Another environment has its own bucket.
            assert (await production.get("/v1/subscribers")).status_code == 200
