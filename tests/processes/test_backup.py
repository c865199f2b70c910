"""``herald backup``: a copy taken while ``herald serve`` writes, restored into a new data folder and served.

The restored server answers with the data of the original: the subscribers,
the API key, and the integration's credentials, which it can open only with
the secret key kept beside the backup.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.processes import HeraldProcesses
from tests.processes.conftest import api_client, create

SECRET_KEY = "backup-test-secret-key"
PROVIDER_KEY = "SG.backup-restore-credential"


def sendgrid_key(integrations: list[dict[str, Any]]) -> str:
    [integration] = [item for item in integrations if item["providerId"] == "sendgrid"]
    return str(integration["credentials"]["apiKey"])


def sqlite_launcher(folder: Path, **fields: str) -> HeraldProcesses:
    return HeraldProcesses(
        database_url=f"sqlite:///{folder / 'herald.db'}", data_dir=folder / "data", log_dir=folder / "logs", **fields
    )


async def shown(api: httpx.AsyncClient) -> tuple[list[dict[str, Any]], list[str]]:
    """The integrations (credentials as answers show them) and the subscribers' ids."""
    integrations = await api.get("/v1/integrations")
    assert integrations.status_code == 200, integrations.text
    subscribers = await api.get("/v1/subscribers", params={"limit": 100})
    assert subscribers.status_code == 200, subscribers.text
    return integrations.json()["data"], sorted(item["subscriberId"] for item in subscribers.json()["data"])


async def test_a_backup_taken_while_serving_restores_and_serves(tmp_path: Path) -> None:
    original = sqlite_launcher(tmp_path / "original", secret_key=SECRET_KEY)
    restored = sqlite_launcher(tmp_path / "restored", secret_key=SECRET_KEY)
    wrong_key = sqlite_launcher(tmp_path / "wrong-key", secret_key="another-secret-key")
    backup = tmp_path / "herald-backup.db"
    try:
        original.migrate()
        api_key = next(env for env in original.bootstrap()["environments"] if env["name"] == "Development")["apiKey"]
        server = await original.serve(worker=True)
        async with api_client(server.url or "", api_key) as api:
            await create(
                api,
                "/v1/integrations",
                {"providerId": "sendgrid", "channel": "email", "active": True,
                 "credentials": {"apiKey": PROVIDER_KEY, "from": "herald@example.com"}},
            )
            for number in range(5):
                await create(api, "/v1/subscribers", {"subscriberId": f"kept-{number}"})

            # Writes go on while the copy is taken.
            copying = asyncio.create_task(asyncio.to_thread(original.run_command, "backup", str(backup)))
            written = 0
            while not copying.done():
                await create(api, "/v1/subscribers", {"subscriberId": f"during-{written}"})
                written += 1
            done = await copying
            assert done.returncode == 0, done.stderr
            assert f"to {backup}" in done.stdout
            assert "Keep HERALD_SECRET_KEY with the backup" in done.stderr
            integrations, subscribers = await shown(api)

            # Never over an existing file: one line, exit 1.
            again = original.run_command("backup", str(backup))
            assert again.returncode == 1
            assert again.stderr.strip().splitlines() == [
                f"herald backup: {backup} exists: herald backup does not overwrite a file; name a new one"
            ]
        server.stop()

        for launcher in (restored, wrong_key):
            shutil.copyfile(backup, launcher.data_dir.parent / "herald.db")

        copy = await restored.serve()
        async with api_client(copy.url or "", api_key) as api:
            restored_integrations, restored_subscribers = await shown(api)
        assert restored_integrations == integrations
        assert sendgrid_key(integrations) == "SG.****tial"  # opened, so shown by its edges
        # Every subscriber made before the copy began; those made while it ran, up to one instant.
        assert {f"kept-{number}" for number in range(5)} <= set(restored_subscribers)
        during = [item for item in restored_subscribers if item.startswith("during-")]
        assert during == sorted(f"during-{number}" for number in range(len(during)))
        assert set(restored_subscribers) <= set(subscribers)

        # Without the secret key it was sealed with, the copy's credentials cannot be opened.
        unopened = await wrong_key.serve()
        async with api_client(unopened.url or "", api_key) as api:
            refused = await api.get("/v1/integrations")
        assert "HERALD_SECRET_KEY differs from the key they were stored with" in refused.json()["message"]
    finally:
        for launcher in (original, restored, wrong_key):
            launcher.stop_all()


def test_postgresql_is_backed_up_with_pg_dump(tmp_path: Path) -> None:
    herald = HeraldProcesses(
        database_url="postgresql://herald@127.0.0.1:5432/herald", data_dir=tmp_path / "data", log_dir=tmp_path / "logs"
    )
    done = herald.run_command("backup", str(tmp_path / "herald.db"))
    assert done.returncode == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("herald backup: PostgreSQL databases are backed up with pg_dump")
    assert "HERALD_SECRET_KEY" in line
    assert not (tmp_path / "herald.db").exists()
