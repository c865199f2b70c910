"""``.ci/run`` checks the PostgreSQL server the tests will use, the one HERALD_TEST_POSTGRES_URL names."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.processes import REPO_ROOT
from tests.fixtures.stores import postgres_base_url, postgres_reachable

pytestmark = pytest.mark.skipif(shutil.which("pg_isready") is None, reason="pg_isready is not installed")


def _run_ci(tmp_path: Path, url: str) -> subprocess.CompletedProcess[str]:
    """.ci/run with ``make`` replaced by a stub that only says it was called (the suite is not run again)."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    make = stubs / "make"
    make.write_text('#!/bin/sh\necho "make $*"\n')
    make.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}", "HERALD_TEST_POSTGRES_URL": url}
    return subprocess.run(
        [str(REPO_ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_an_unreachable_server_named_by_the_url_stops_the_run(tmp_path: Path) -> None:
    done = _run_ci(tmp_path, "postgresql://postgres@herald-ci-check.invalid:5999/test")
    assert done.returncode == 1
    assert "herald-ci-check.invalid:5999" in done.stderr
    assert "make test" not in done.stdout


async def test_the_reachable_server_of_the_url_runs_the_tests(tmp_path: Path) -> None:
    if not await postgres_reachable():
        pytest.skip("PostgreSQL is not reachable")
    done = _run_ci(tmp_path, postgres_base_url())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("make test")
