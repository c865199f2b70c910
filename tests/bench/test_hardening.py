"""bench/hardening.py's load cases run, each on a Herald of its own, in smoke mode (tiny sizes, nothing timed).

On SQLite only: the cases' code is the same on both stores, and sixteen Heralds started one after another
cost the suite a minute and a half (the full runs on PostgreSQL are in bench/results/*-hardening.json).
"""

from __future__ import annotations

import pytest

from bench import hardening
from tests.fixtures.stores import postgres_base_url, postgres_reachable


@pytest.mark.parametrize("store", ["sqlite"])
async def test_every_load_case_runs_and_reports_what_it_saw(store: str) -> None:
    if store == "postgres" and not await postgres_reachable():
        pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
    options = hardening.parse_args(["--smoke", "--store", store, "--postgres", postgres_base_url(), "--no-write"])

    found = await hardening.measure(options)

    assert [result.name for result in found] == list(hardening.CASES)
    for result in found:
        assert result.error is None, (result.name, result.error)
        assert result.outcome is not None and result.outcome.defence
        assert result.health is not None, result.name
        row = result.row()
        assert row.figures["health_polls"] == len(result.health.asked) > 0
        assert row.unit == "ms" and row.value is not None
    by_name = {result.name: result.outcome for result in found}
    # The smoke sizes stay under every limit: the translated step renders, the sessions are all made.
    assert by_name["translations"].figures["messages"] == hardening.SMOKE.translation_triggers
    assert by_name["sessions"].figures["subscribers_created"] == hardening.SMOKE.sessions


def test_an_unknown_case_is_refused() -> None:
    with pytest.raises(SystemExit):
        hardening.parse_args(["--cases", "baseline,nope"])
