"""The Analytics page: the environment's messages over 7 or 30 days, as SVG charts and tables."""

from __future__ import annotations

from datetime import date

from fastapi import APIRouter
from starlette.responses import Response

from herald.analytics import service
from herald.console.charts import Chart, bar_chart, line_chart
from herald.console.deps import ConsoleDep

router = APIRouter()


def _label(day: date) -> str:
    return f"{day:%b} {day.day}"


def charts_of(numbers: service.Analytics) -> list[Chart]:
    """Every chart of the page, each with its table (herald/console/charts.py)."""
    labels = [_label(day) for day in numbers.days]
    channels = numbers.channels or ["messages"]
    charts = [
        bar_chart(
            "Messages by day and channel",
            labels,
            numbers.by_day_channel or {"messages": [0] * len(labels)},
            label_header="Day",
        ),
        line_chart(
            "Messages by day and status",
            labels,
            numbers.by_day_status or {"messages": [0] * len(labels)},
            label_header="Day",
        ),
        bar_chart(
            "Messages by channel and status",
            channels,
            {status: [numbers.by_channel_status.get(channel, {}).get(status, 0) for channel in channels] for status in numbers.statuses}
            or {"messages": [0] * len(channels)},
            label_header="Channel",
        ),
    ]
    if numbers.active_subscribers:
        charts.append(
            line_chart(
                "Active subscribers by day (sent at least one message)",
                [_label(day) for day in numbers.active_subscribers],
                {"subscribers": list(numbers.active_subscribers.values())},
                label_header="Day",
            )
        )
    if numbers.top_workflows:
        charts.append(
            bar_chart(
                "Top workflows by messages",
                [item.name for item in numbers.top_workflows],
                {
                    "messages": [item.messages for item in numbers.top_workflows],
                    "errors": [item.errors for item in numbers.top_workflows],
                },
                label_header="Workflow",
            )
        )
    if numbers.providers:
        charts.append(
            bar_chart(
                "Provider error rates (% of messages)",
                [f"{item.provider_id} ({item.errors:,} of {item.messages:,})" for item in numbers.providers],
                {"error rate %": [round(item.rate, 2) for item in numbers.providers]},
                label_header="Provider (errors of messages)",
            )
        )
    return charts


@router.get("/analytics")
async def analytics_page(console: ConsoleDep) -> Response:
    console.authorize("analytics.read")
    asked = (console.request.query_params.get("days") or "7").strip()[:4]
    days = int(asked) if asked.isdigit() and int(asked) in service.RANGES else service.RANGES[0]
    numbers = await service.analytics(console.db, console.principal, days)
    return console.render(
        "analytics.html",
        title="Analytics",
        days=days,
        ranges=service.RANGES,
        numbers=numbers,
        charts=charts_of(numbers),
    )
