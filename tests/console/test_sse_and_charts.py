"""The console's server-sent events helper and its SVG charts."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from starlette.requests import Request

from herald.console.charts import bar_chart, line_chart
from herald.console.sse import event_stream, format_event
from herald.realtime.activity import ActivityHub


def _request() -> Request:
    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # a browser that stays
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "GET", "path": "/", "headers": [], "query_string": b""}, receive)


async def test_the_stream_sends_an_event_when_the_environment_changes_and_comments_meanwhile() -> None:
    hub = ActivityHub("sqlite://")
    async with hub.watch("env-1") as watch:
        stream = event_stream(_request(), watch.wait, "activity", heartbeat=0.05, lifetime=60)
        assert (await anext(stream)).startswith(b"retry: ")
        assert await anext(stream) == b": keep-alive\n\n"
        hub.deliver(["env-2"])  # another environment's change is not this stream's
        assert await anext(stream) == b": keep-alive\n\n"
        hub.deliver(["env-1"])
        assert await anext(stream) == b"event: activity\ndata: {}\n\n"
        await stream.aclose()
    # The stream's watch is gone with it.
    hub.deliver(["env-1"])
    assert format_event("activity", "a\nb") == b"event: activity\ndata: a\ndata: b\n\n"


async def test_a_stream_ends_after_its_lifetime() -> None:
    hub = ActivityHub("sqlite://")
    async with hub.watch("env-1") as watch:
        chunks = [chunk async for chunk in event_stream(_request(), watch.wait, "activity", heartbeat=0.01, lifetime=0.05)]
    assert chunks[0].startswith(b"retry: ") and all(chunk == b": keep-alive\n\n" for chunk in chunks[1:])


def test_a_bar_chart_draws_each_value_and_tables_the_same_numbers() -> None:
    chart = bar_chart("Messages by channel", ["Mon", "Tue"], {"email": [3, 10], "sms": [0, 1250]}, label_header="Day")
    svg = str(chart.svg)
    assert svg.startswith("<svg") and 'role="img"' in svg and "<title" in svg and "<desc" in svg
    assert len(re.findall(r"<rect ", svg)) == 4
    assert "Tue, sms: 1,250" in svg and " style=" not in svg
    assert chart.table == [["Day", "email", "sms"], ["Mon", "3", "0"], ["Tue", "10", "1,250"]]
    # The tallest bar reaches the top of the axis (2,000: 1,250 rounded up), the others in proportion.
    heights = [float(value) for value in re.findall(r'height="([\d.]+)"', svg)[1:]]
    assert max(heights) == pytest.approx(196 * 1250 / 2000, abs=0.1)


def test_a_line_chart_and_labels_are_escaped() -> None:
    chart = line_chart("<Errors>", ["a&b", "c"], {"rate <%>": [0.5, 0.25]})
    svg = str(chart.svg)
    assert "<Errors>" not in svg and "&lt;Errors&gt;" in svg and "a&amp;b" in svg
    assert svg.count("<polyline") == 1
    assert chart.table[1] == ["a&b", "0.50"]
    with pytest.raises(ValueError):
        bar_chart("x", ["a", "b"], {"s": [1]})
