"""What ``herald serve`` and ``herald worker`` write to their logs: no credential, and JSON when asked."""

from __future__ import annotations

import asyncio
import json

import httpx
import websockets

from tests.fixtures.metrics import parse
from tests.fixtures.processes import HeraldProcesses, wait_until
from tests.fixtures.server import free_port
from tests.processes.conftest import IN_APP, ProcessStore, api_client, create, messages_of, trigger

METRICS_TOKEN = "metrics-token-of-the-process-tests"

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWJzY3JpYmVySWQiOiJsb2dzIn0.c2lnbmF0dXJlLW5vdC1pbi10aGUtbG9n"


async def test_the_inbox_sockets_session_token_is_masked_in_the_servers_log(store: ProcessStore, herald: HeraldProcesses) -> None:
    """@novu/js sends the session token in the socket's query; the server logs each websocket's path and query."""
    api = await herald.serve()
    url = api.url.replace("http://", "ws://") + f"/socket.io/?EIO=4&transport=websocket&token={TOKEN}"
    async with websockets.connect(url) as socket:
        assert str(await socket.recv()).startswith("0")  # engine.io's open packet: the websocket was accepted
    for _ in range(50):
        if "WebSocket /socket.io/" in api.log():
            break
        await asyncio.sleep(0.1)
    log = api.log()
    assert "transport=websocket&token=***" in log  # the line is written, with the value masked
    assert TOKEN not in log and TOKEN.split(".")[2] not in log


async def test_json_logs_and_metrics_of_an_api_and_a_worker_process(store: ProcessStore, herald: HeraldProcesses) -> None:
    """HERALD_LOG_FORMAT=json: every line of both processes, uvicorn's included, is one JSON object;
    each serves its own metrics, the worker's on HERALD_METRICS_PORT, both behind the token."""
    metrics_port = free_port()
    settings = {"HERALD_LOG_FORMAT": "json", "HERALD_METRICS_TOKEN": METRICS_TOKEN}
    api = await herald.serve(**settings)
    worker = await herald.worker(HERALD_METRICS_PORT=str(metrics_port), **settings)
    bearer = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    async with api_client(api.url or "", store.api_key) as client:
        subscriber = await create(client, "/v1/subscribers", {"subscriberId": "json-logs-subscriber", "email": "json.logs@example.com"})
        workflow = await create(client, "/v1/workflows", {"name": "json-logs", "active": True, "steps": [IN_APP]})
        transaction_id = await trigger(client, workflow, subscriber["subscriberId"])
        await wait_until(lambda: messages_of(store, transaction_id), timeout=30, what="the in-app message", describe=herald.describe)
        api_scrape = await client.get("/metrics", headers=bearer)
        refused = await client.get("/metrics")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{metrics_port}") as scraper:
        worker_scrape = await scraper.get("/metrics", headers=bearer)
        worker_refused = await scraper.get("/metrics")
    assert (refused.status_code, worker_refused.status_code) == (401, 401)

    api_samples = parse(api_scrape.text)
    assert api_samples[("herald_http_requests_total", (("method", "POST"), ("route", "/v1/events/trigger"), ("status", "201")))] == 1
    worker_samples = parse(worker_scrape.text)
    # The worker stored the message: its own process counted it, the API's did not.
    assert worker_samples[("herald_messages_total", (("channel", "in_app"), ("status", "sent")))] == 1
    assert ("herald_messages_total", (("channel", "in_app"), ("status", "sent"))) not in api_samples

    api.stop()
    worker.stop()
    entries = {process.name: [json.loads(line) for line in process.log().splitlines() if line.strip()] for process in (api, worker)}
    for lines in entries.values():
        assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in entries["serve"])
    assert any(line["message"].startswith(f"worker {worker.worker_id} started") for line in entries["worker"])
    [access] = [line for line in entries["serve"] if line["logger"] == "herald.access" and line["route"] == "/v1/events/trigger"]
    assert {key: access[key] for key in ("method", "status", "environment")} == {"method": "POST", "status": 201, "environment": store.environment_id}
    everything = api.log() + worker.log()
    assert store.api_key not in everything and "json.logs@example.com" not in everything
