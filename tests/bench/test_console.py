"""The console row of the bench: a page not built is reported so; a built one is timed and judged."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from bench import console, results


class Meter:
    """The CPU meter's shape: what other processes used while a page was timed."""

    def start(self) -> None:
        self.started = True

    def stop(self) -> dict[str, float]:
        return {"other": 0.25}


async def _page(request: object) -> PlainTextResponse:
    return PlainTextResponse("a page")


async def test_a_page_answering_404_is_not_built_and_one_answering_200_is_timed() -> None:
    app = Starlette(routes=[Route("/console/analytics", _page)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
        missing = await console.measure_page(client, "Activity", "/console/activity", 1, 5, Meter())
        built = await console.measure_page(client, "Analytics, 30 days", "/console/analytics", 1, 7, Meter())
    assert (missing.status, missing.times) == ("not built", [])
    assert built.status == "measured" and len(built.times) == 7 and built.others == 0.25
    rows = console.rows_of([missing, built])
    assert rows[0].result == "not built" and rows[0].verdict == "" and rows[0].value is None
    assert rows[1].unit == "ms" and rows[1].figures["views"] == 7


def test_the_row_is_judged_by_its_p95_and_the_reference_is_not() -> None:
    # 20 views: the p95 is the 19th fastest, so one slow view does not fail the page, two do.
    one_slow = console.PageTime("Analytics, 30 days", "/a", "measured", [0.010] * 19 + [0.400], first=2.0, others=0.25)
    two_slow = console.PageTime("Analytics, 30 days", "/a", "measured", [0.010] * 18 + [0.400] * 2, first=2.0)
    reference = console.PageTime("Members (reference)", "/m", "measured", [0.400] * 20)
    rows = console.rows_of([one_slow, two_slow, reference])
    assert [row.verdict for row in rows] == ["pass", "**FAIL**", ""]
    assert rows[0].result == "p50 10.0 ms, p95 10.0 ms (20 views; first view 2,000 ms; other processes 0.25 cores)"
    assert rows[1].value == 400.0 and rows[2].target == ""


def test_a_console_run_has_a_file_of_its_own() -> None:
    record = {"timestamp": "2026-11-29T07:58:12Z", "store": "postgres", "kind": "console"}
    assert results.file_name(record) == "2026-11-29T0758Z-postgres-console.json"
