"""``make clean`` removes what the build made; the data folder goes only by ``make clean-data``, after a yes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def make(*args: str, data_dir: Path, answer: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args, f"HERALD_DATA_DIR={data_dir}"],
        cwd=REPO_ROOT,
        input=answer,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_clean_leaves_the_data_folder(tmp_path: Path) -> None:
    # -n: the commands clean would run, without running them (it deletes the virtualenv).
    planned = make("-n", "clean", data_dir=tmp_path / "data")
    assert planned.returncode == 0, planned.stderr
    assert ".venv" in planned.stdout
    assert ".herald" not in planned.stdout and str(tmp_path) not in planned.stdout


@pytest.mark.parametrize("answer", ["", "no\n", "y\n"])
def test_clean_data_keeps_the_folder_without_a_yes(tmp_path: Path, answer: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "secret.key").write_text("kept")
    done = make("clean-data", data_dir=data, answer=answer)
    assert done.returncode == 0, done.stderr
    assert f"Kept {data}" in done.stdout
    assert (data / "secret.key").read_text() == "kept"


def test_clean_data_deletes_the_folder_after_a_yes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "herald.db").write_text("")
    done = make("clean-data", data_dir=data, answer="yes\n")
    assert done.returncode == 0, done.stderr
    assert f"Delete {data}: the database, secret.key and the Development API key" in done.stdout
    assert not data.exists()
