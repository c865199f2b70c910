"""A first run that goes wrong: a database not migrated, behind the code, not there, or not one Herald speaks.

Each is one line on stderr and exit 1, no traceback, and nothing half made.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from herald.migrations import _scripts, head_revision, upgrade_async
from tests.fixtures import stores
from tests.fixtures.processes import HERALD_COMMAND, REPO_ROOT, HeraldProcesses, wait_until
from tests.fixtures.server import free_port

# serve and worker would otherwise run on; the test fails when they do not exit soon.
REFUSAL_TIMEOUT = 30.0
COMMANDS_THAT_NEED_THE_SCHEMA = [
    ("bootstrap",),
    ("serve", "--no-worker"),
    ("worker",),
    ("keys", "create", "--environment", "Development"),
    ("environments", "protect", "Production"),
]


def _herald(database_url: str, tmp_path: Path) -> HeraldProcesses:
    return HeraldProcesses(database_url=database_url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _previous(revision: str) -> str:
    down = _scripts().get_revision(revision).down_revision
    assert isinstance(down, str)
    return down


@pytest.mark.parametrize("command", COMMANDS_THAT_NEED_THE_SCHEMA, ids=lambda command: command[0])
async def test_commands_refuse_a_database_with_no_schema(
    command: tuple[str, ...], empty_database: stores.TestDatabase, tmp_path: Path
) -> None:
    herald = _herald(empty_database.url, tmp_path)
    done = herald.run_command(*command, timeout=REFUSAL_TIMEOUT)
    assert _one_line(done) == f"herald {command[0]}: the database at {empty_database.url} has no schema: run 'herald migrate'"
    if empty_database.kind == "sqlite":
        # Not created to find out.
        assert not Path(make_url(empty_database.url).database).exists()


@pytest.mark.parametrize("command", COMMANDS_THAT_NEED_THE_SCHEMA, ids=lambda command: command[0])
async def test_commands_refuse_a_schema_behind_the_code_until_it_is_migrated(
    command: tuple[str, ...], empty_database: stores.TestDatabase, tmp_path: Path
) -> None:
    head = head_revision()
    await upgrade_async(empty_database.url, _previous(head))
    herald = _herald(empty_database.url, tmp_path)
    done = herald.run_command(*command, timeout=REFUSAL_TIMEOUT)
    assert _one_line(done) == (
        f"herald {command[0]}: the database at {empty_database.url} is at revision {_previous(head)}, "
        f"the code needs {head}: run 'herald migrate'"
    )
    if command[0] == "bootstrap":
        herald.migrate()
        assert herald.run_command(*command).returncode == 0


def test_a_refused_bootstrap_leaves_no_files_in_a_fresh_data_folder(tmp_path: Path) -> None:
    """``herald bootstrap`` before ``herald migrate`` on a fresh machine: no database file, no secret key."""
    data_dir = tmp_path / "data"
    env = {key: value for key, value in os.environ.items() if not key.startswith("HERALD_")}
    done = subprocess.run(
        [*HERALD_COMMAND, "bootstrap", "--announce"],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(REPO_ROOT), "HERALD_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    database = data_dir / "herald.db"
    assert _one_line(done) == f"herald bootstrap: the database at sqlite:///{database} has no schema: run 'herald migrate'"
    assert not database.exists()
    assert not data_dir.exists() or sorted(path.name for path in data_dir.iterdir()) == []


async def test_the_password_is_left_out_of_what_is_printed(tmp_path: Path) -> None:
    if not await stores.postgres_reachable():
        pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
    database = await stores.create_postgres_database()
    try:
        url = make_url(database.url)
        if url.password:
            pytest.skip("the test server checks passwords")
        # The test server trusts loopback connections: the password is sent and not checked.
        with_password = url.set(password="s3cret-pass").render_as_string(hide_password=False)
        line = _one_line(_herald(with_password, tmp_path).run_command("bootstrap"))
        assert line == f"herald bootstrap: the database at {database.url} has no schema: run 'herald migrate'"
        assert "s3cret-pass" not in line
    finally:
        await database.drop()


async def test_migrate_names_a_postgresql_database_that_does_not_exist(tmp_path: Path) -> None:
    if not await stores.postgres_reachable():
        pytest.skip("PostgreSQL is not reachable (set HERALD_TEST_POSTGRES_URL)")
    name = f"herald_missing_{secrets.token_hex(4)}"
    base = make_url(stores.postgres_base_url())
    url = base.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
    done = _herald(url, tmp_path).run_command("migrate")
    host, port = base.host or "localhost", base.port or 5432
    user = f" -U {base.username}" if base.username else ""
    assert _one_line(done) == (
        f'herald migrate: the database "{name}" does not exist on {host}:{port}: '
        f"create it (createdb -h {host} -p {port}{user} {name}) or set HERALD_DATABASE_URL"
    )


@pytest.mark.parametrize("command", ["migrate", "bootstrap"])
def test_an_unreachable_postgresql_server_is_one_line(command: str, tmp_path: Path) -> None:
    port = free_port()
    done = _herald(f"postgresql://postgres@127.0.0.1:{port}/herald", tmp_path).run_command(command)
    line = _one_line(done)
    assert line.startswith(f"herald {command}: no PostgreSQL server answers at 127.0.0.1:{port} (")
    assert line.endswith("): start it or set HERALD_DATABASE_URL")


@pytest.mark.parametrize(
    ("command", "url"),
    [
        (("migrate",), "mysql://root:pw@127.0.0.1/herald"),
        (("bootstrap",), "foo://"),
        (("serve",), "mysql://root:pw@127.0.0.1/herald"),
        (("worker",), "herald.db"),
        (("keys", "revoke", "some-key"), "foo://bar"),
    ],
    ids=lambda value: value[0] if isinstance(value, tuple) else value,
)
def test_an_unsupported_database_url_names_the_supported_ones(
    command: tuple[str, ...], url: str, tmp_path: Path
) -> None:
    line = _one_line(_herald(url, tmp_path).run_command(*command, timeout=REFUSAL_TIMEOUT))
    assert line.startswith(f"herald {command[0]}: HERALD_DATABASE_URL ")
    assert line.endswith(": use sqlite:///path or postgresql://user:password@host:port/database")
    assert "pw@" not in line


def test_migrate_refuses_a_database_a_newer_herald_migrated(tmp_path: Path) -> None:
    database = tmp_path / "herald.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        connection.execute("INSERT INTO alembic_version VALUES ('9999')")
    done = _herald(f"sqlite:///{database}", tmp_path).run_command("migrate")
    assert _one_line(done) == (
        f"herald migrate: the database at sqlite:///{database} is at revision 9999, which this version of Herald "
        "does not know (a newer one migrated it): run a Herald that has revision 9999"
    )


async def test_the_addresses_announced_for_a_server_on_every_interface_answer(tmp_path: Path) -> None:
    """``HERALD_HOST=0.0.0.0 make run``: the banner and ``serve`` show the loopback address, which answers."""
    port = free_port()
    herald = HeraldProcesses(
        database_url=f"sqlite:///{tmp_path / 'herald.db'}",
        data_dir=tmp_path / "data",
        log_dir=tmp_path / "logs",
        env={"HERALD_HOST": "0.0.0.0", "HERALD_PORT": str(port)},
    )
    herald.migrate()
    announced = herald.run("bootstrap", "--announce")
    base = f"http://127.0.0.1:{port}"
    assert f"  API:       {base}/v1\n" in announced
    assert f"  Docs:      {base}/docs\n" in announced
    server = herald.spawn("serve", "serve", "--no-worker")
    try:
        async with httpx.AsyncClient(timeout=2) as client:

            async def docs() -> httpx.Response | None:
                assert server.alive(), server.describe()
                try:
                    return await client.get(f"{base}/docs")
                except httpx.TransportError:
                    return None

            response = await wait_until(docs, timeout=30, what="the announced docs address", describe=server.describe)
            assert response.status_code == 200
            assert (await client.get(f"{base}/v1/health-check")).status_code == 200
        assert f"API on {base}/v1, docs on {base}/docs" in server.log()
    finally:
        herald.stop_all()


def test_migrate_names_a_sqlite_path_it_cannot_open(tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    done = _herald(f"sqlite:///{folder}", tmp_path).run_command("migrate")
    assert _one_line(done) == (
        f"herald migrate: cannot open the SQLite database {folder}: unable to open database file; "
        "check the path in HERALD_DATABASE_URL"
    )
