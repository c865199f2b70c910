"""The official SDKs' suites (novu-py per operation, @novu/api in Node) run against SQLite only.

What they check is the wire: every answer validated by the SDK's own models. The store behind a route
does not change its shape, and every route's own tests (tests/<feature>/) run it on SQLite and
PostgreSQL; running the two SDK suites on both stores doubled their 430 cases and the suite's time.
"""

from __future__ import annotations

import pytest

HERE = __file__.rsplit("/", 1)[0]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    postgres = [
        item
        for item in items
        if str(item.path).startswith(HERE)
        and getattr(item, "callspec", None) is not None
        and item.callspec.params.get("database") == "postgres"
    ]
    if postgres:
        config.hook.pytest_deselected(items=postgres)
        dropped = {id(item) for item in postgres}
        items[:] = [item for item in items if id(item) not in dropped]
