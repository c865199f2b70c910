"""``herald users``: members added and listed from the command line, one line each; errors in one line, exit 1."""

from __future__ import annotations

import re
from pathlib import Path

from herald.kit.db import create_engine, create_sessionmaker
from herald.members.passwords import verify_password
from herald.members.repository import MemberRepository
from tests.fixtures import stores
from tests.fixtures.processes import HeraldProcesses

PASSWORD = "correct horse battery staple"


async def _stored_hash(url: str, email: str) -> str | None:
    engine = create_engine(url, pool_size=1)
    try:
        async with create_sessionmaker(engine)() as session:
            member = await MemberRepository(session).member_by_email(email)
            assert member is not None
            return member.password_hash
    finally:
        await engine.dispose()


async def test_users_add_and_list(empty_database: stores.TestDatabase, tmp_path: Path) -> None:
    herald = HeraldProcesses(database_url=empty_database.url, data_dir=tmp_path / "data", log_dir=tmp_path / "logs")
    herald.migrate()
    herald.bootstrap()

    added = herald.run_command("users", "add", "Ann@Example.com", "--role", "owner", "--password-stdin", input=PASSWORD + "\n")
    assert added.returncode == 0, added.stderr
    assert re.fullmatch(r"ann@example\.com owner [0-9a-f]{24}\n", added.stdout)
    # The password came from standard input, and only its argon2id hash is stored.
    stored = await _stored_hash(empty_database.url, "ann@example.com")
    assert stored is not None and stored.startswith("$argon2id$") and PASSWORD not in stored
    assert await verify_password(stored, PASSWORD)

    sso_only = herald.run_command("users", "add", "bob@example.com", "--role", "viewer")
    assert sso_only.returncode == 0, sso_only.stderr
    assert await _stored_hash(empty_database.url, "bob@example.com") is None

    listed = herald.run("users", "list").splitlines()
    assert [line.split()[:2] for line in listed] == [["ann@example.com", "owner"], ["bob@example.com", "viewer"]]
    assert listed[0] == added.stdout.strip()


def _sqlite(tmp_path: Path) -> HeraldProcesses:
    """A SQLite store: what these tests check is the command's, whichever store answers it."""
    return HeraldProcesses(
        database_url=f"sqlite:///{tmp_path / 'herald.db'}", data_dir=tmp_path / "data", log_dir=tmp_path / "logs"
    )


def test_users_errors_are_one_line_and_exit_1(tmp_path: Path) -> None:
    herald = _sqlite(tmp_path)
    herald.migrate()
    before_bootstrap = herald.run_command("users", "list")
    assert (before_bootstrap.returncode, before_bootstrap.stderr.strip()) == (
        1,
        "herald users: No organization yet: run `herald bootstrap` first",
    )
    herald.bootstrap()
    cases = {
        ("ann@example.com", "--role", "king"): "herald users: The role must be one of owner, admin, author, viewer",
        ("not-an-email", "--role", "viewer"): "herald users: Enter an email address in the correct format, like name@example.com",
    }
    for args, message in cases.items():
        done = herald.run_command("users", "add", *args, "--password-stdin", input=PASSWORD + "\n")
        assert (done.returncode, done.stdout, done.stderr.strip()) == (1, "", message)
    short = herald.run_command("users", "add", "ann@example.com", "--role", "owner", "--password-stdin", input="short\n")
    assert (short.returncode, short.stderr.strip()) == (1, "herald users: The password must be at least 10 characters long")
    herald.run("users", "add", "ann@example.com", "--role", "owner", "--password-stdin", input=PASSWORD + "\n")
    taken = herald.run_command("users", "add", "ANN@example.com", "--role", "admin", "--password-stdin", input=PASSWORD + "\n")
    assert (taken.returncode, taken.stderr.strip()) == (1, "herald users: A member with the email ann@example.com exists already")
    assert all("Traceback" not in line for line in (short.stderr, taken.stderr))


def test_bootstrap_announce_prints_the_console_and_the_first_owner_link_until_there_is_one(tmp_path: Path) -> None:
    herald = _sqlite(tmp_path)
    herald.migrate()
    first = herald.run("bootstrap", "--announce")
    assert "  Console:   http://127.0.0.1:3000/console\n" in first
    [link] = re.findall(r"http://127\.0\.0\.1:3000/console/setup/[A-Za-z0-9_-]{43}", first)
    herald.run("users", "add", "ann@example.com", "--role", "owner", "--password-stdin", input=PASSWORD + "\n")
    second = herald.run("bootstrap", "--announce")
    assert "/console/setup/" not in second and "Console:" in second
    off = herald.run("bootstrap", "--announce", HERALD_CONSOLE="off")
    assert "Console" not in off and link not in off
    sso = herald.run("bootstrap", "--announce", HERALD_OIDC_ISSUER="https://id.example.com", HERALD_OIDC_CLIENT_ID="herald")
    assert "or sign in with SSO (https://id.example.com)" in sso and "sign in with SSO" not in second


def test_a_wrong_oidc_setting_is_one_line_without_a_traceback(tmp_path: Path) -> None:
    herald = _sqlite(tmp_path)
    done = herald.run_command("bootstrap", HERALD_OIDC_ISSUER="https://id.example.com")
    assert done.returncode != 0
    assert "HERALD_OIDC_ISSUER is set but HERALD_OIDC_CLIENT_ID is not" in done.stderr
    assert "Traceback" not in done.stderr
