"""Other routes' answers while clients preview a CPU-heavy step.

    python -m bench.previews [--clients 3] [--seconds 20] [--postgres ADMIN_URL] [--tree DIR]

Starts Herald as ``make bench`` does (``herald serve``, its worker inside, the
default rate limits), makes a workflow whose in-app step runs near the 250 ms
render limit, and has ``--clients`` clients ask for its preview
(``POST /v2/workflows/{id}/step/{stepId}/preview``) back to back for
``--seconds``. Meanwhile ``GET /v1/health-check`` and ``GET /v1/subscribers``
are each asked every 100 ms: their median and slowest answers are the
figures, with the previews answered, refused (429: the environment's
previews at once, or its rate limit; the client waits its Retry-After) and
failed. ``--tree`` runs another checkout of Herald (as bench/ab.py does).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from bench import harness
from bench.harness import Environment, Store

HEAVY = "{% for i in (1..6000) %}{% assign u = payload.big | upcase %}{% endfor %}done"


async def measure(options: argparse.Namespace) -> dict[str, Any]:
    folder = harness.make_folder()
    store = await Store.postgres(options.postgres) if options.postgres else Store.sqlite(folder)
    # The default rate limits: a preview's charge is part of what is measured.
    limits = {"HERALD_RATE_LIMIT_TRIGGERS": "1000", "HERALD_RATE_LIMIT_REQUESTS": "500"}
    environment = Environment(folder, store, extra_env=limits, tree=options.tree or harness.REPO)
    try:
        api_key = await asyncio.to_thread(environment.prepare)
        deployment = await environment.start_herald("uvicorn", api_key, 0)
        headers = {"Authorization": f"ApiKey {api_key}"}
        async with httpx.AsyncClient(base_url=deployment.base_url, headers=headers, timeout=60) as client:
            created = await client.post(
                "/v1/workflows",
                json={"name": "heavy preview", "active": True,
                      "steps": [{"name": "inbox", "template": {"type": "in_app", "content": HEAVY}}]},
            )
            created.raise_for_status()
            path = f"/v2/workflows/{created.json()['data']['_id']}/step/inbox/preview"
            body = {"previewPayload": {"payload": {"big": "x" * 2000}}}
            stop = asyncio.Event()
            outcomes: Counter[str] = Counter()
            timings: dict[str, list[float]] = {"/v1/health-check": [], "/v1/subscribers": []}

            async def preview() -> None:
                while not stop.is_set():
                    answer = await client.post(path, json=body)
                    result = answer.json().get("data", {}).get("result", {}) if answer.status_code == 201 else {}
                    outcomes["error" if "error" in result else str(answer.status_code)] += 1
                    if answer.status_code == 429:  # as a client told Retry-After does
                        await asyncio.sleep(float(answer.headers.get("retry-after", "1")))

            async def poll(route: str) -> None:
                async with httpx.AsyncClient(base_url=deployment.base_url, headers=headers, timeout=60) as poller:
                    while not stop.is_set():
                        asked = time.monotonic()
                        await poller.get(route)
                        timings[route].append(time.monotonic() - asked)
                        await asyncio.sleep(max(0.0, 0.1 - (time.monotonic() - asked)))

            tasks = [asyncio.create_task(preview()) for _ in range(options.clients)]
            tasks += [asyncio.create_task(poll(route)) for route in timings]
            await asyncio.sleep(options.seconds)
            stop.set()
            await asyncio.gather(*tasks)
        deployment.stop()
        result: dict[str, Any] = {"store": store.label, "clients": options.clients, "seconds": options.seconds}
        result.update({f"previews_{name}": count for name, count in sorted(outcomes.items())})
        for route, seconds in timings.items():
            name = route.strip("/").replace("/", "_").replace("-", "_")
            result[f"{name}_median_ms"] = statistics.median(seconds) * 1000 if seconds else None
            result[f"{name}_max_ms"] = max(seconds) * 1000 if seconds else None
            result[f"{name}_polls"] = len(seconds)
        return result
    finally:
        environment.stop_all()
        await store.drop()
        harness.remove_folder(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.previews", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=3, help="clients previewing back to back")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long they preview")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="run on PostgreSQL (a database of its own on that server)")
    parser.add_argument("--tree", type=Path, help="another checkout of Herald to run")
    options = parser.parse_args(argv)
    for name, value in asyncio.run(measure(options)).items():
        print(f"{name:36} {value if not isinstance(value, float) else round(value, 1)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
