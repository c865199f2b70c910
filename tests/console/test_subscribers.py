"""The Subscribers pages: search, a subscriber's page, the CSV import and its progress, roles and CSRF."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI

from herald.subscribers import imports
from tests.conftest import Tenancy
from tests.fixtures.builders import create_subscriber, create_workflow, insert_in_app_message
from tests.fixtures.console import ConsoleAs, ConsoleClient

IMPORT_PATH = re.compile(r"/console/subscribers/import/([A-Za-z0-9]+)")


async def upload(client: ConsoleClient, content: bytes, *, filename: str = "people.csv", csrf: str | None = None) -> httpx.Response:
    token = client.csrf if csrf is None else csrf
    data = {"csrf_token": token} if token else {}
    return await client.client.post(
        "/console/subscribers/import", data=data, files={"file": (filename, content, "text/csv")}
    )


async def imported(app: FastAPI, client: ConsoleClient, content: bytes) -> tuple[str, httpx.Response]:
    """Upload ``content``, wait for its task to end, and answer the import's page."""
    started = await upload(client, content)
    assert started.status_code == 303, started.text
    found = IMPORT_PATH.search(started.headers["location"])
    assert found is not None
    import_id = found.group(1)
    await imports.runner_of(app.state).wait(import_id)
    return import_id, await client.get(f"/console/subscribers/import/{import_id}")


async def add_subscriber(api: httpx.AsyncClient, subscriber_id: str, **fields: object) -> None:
    response = await api.post("/v1/subscribers", json={"subscriberId": subscriber_id, **fields})
    assert response.status_code == 201, response.text


async def test_search_finds_by_the_start_of_a_subscriber_id_email_phone_or_name(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    await add_subscriber(api, "ada-1815", email="countess@analytical.example", firstName="Ada", lastName="Lovelace", phone="+447700900123")
    await add_subscriber(api, "grace-1906", email="grace@navy.example", firstName="Grace", lastName="Hopper", phone="+15550001906")
    viewer = await console_as("viewer")
    page = await viewer.get("/console/subscribers")
    assert page.status_code == 200
    assert '<label for="search">Search</label>' in page.text
    assert "ada-1815" in page.text and "grace-1906" in page.text
    cases = {"ada-": "ada-1815", "COUNTESS@": "ada-1815", "+1555": "grace-1906", "grace hop": "grace-1906", "Lovelace": "ada-1815"}
    for text, expected in cases.items():
        found = await viewer.get("/console/subscribers", params={"search": text})
        other = "grace-1906" if expected == "ada-1815" else "ada-1815"
        assert expected in found.text and other not in found.text, text
    # A prefix, not anywhere inside: "1815" is inside ada's subscriberId only.
    none = await viewer.get("/console/subscribers", params={"search": "1815"})
    assert "ada-1815" not in none.text and "starts with" in none.text
    # LIKE's wildcards are plain characters.
    assert "ada-1815" not in (await viewer.get("/console/subscribers", params={"search": "%"})).text


async def test_search_pages_by_keyset_newest_first(console_as: ConsoleAs, api: httpx.AsyncClient) -> None:
    bulk = await api.post("/v1/subscribers/bulk", json={"subscribers": [{"subscriberId": f"pager-{n:03d}"} for n in range(30)]})
    assert bulk.status_code == 201, bulk.text
    viewer = await console_as("viewer")
    first = await viewer.get("/console/subscribers", params={"search": "pager-"})
    shown = re.findall(r">(pager-\d{3})</a>", first.text)
    assert len(shown) == 25 and shown == sorted(shown, reverse=True)
    older = re.search(r'href="(/console/subscribers\?[^"]*before=[^"]+)" rel="next"', first.text)
    assert older is not None
    second = await viewer.get(older.group(1).replace("&amp;", "&"))
    rest = re.findall(r">(pager-\d{3})</a>", second.text)
    assert len(rest) == 5 and not set(rest) & set(shown)
    assert 'rel="next"' not in second.text and "Newest subscribers" in second.text


async def test_a_subscribers_page_shows_profile_masked_credentials_preferences_and_messages(
    app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    integration = await api.post(
        "/v1/integrations",
        json={"providerId": "slack", "channel": "chat", "credentials": {}, "active": True, "identifier": "team-slack"},
    )
    assert integration.status_code == 201, integration.text
    secret_url = "https://hooks.slack.example/services/T000/B000/very-secret-token"
    lin = await create_subscriber(api, subscriberId="lin-42", email="lin@example.com", firstName="Lin", locale="en-GB", data={"plan": "gold"})
    await create_workflow(api, name="Garden news")
    await insert_in_app_message(app, lin, template_identifier="garden-news", status="sent", read=True, seen=True)
    await insert_in_app_message(app, lin, channel="email", template_identifier="garden-news", status="error", error_text="Mailbox full")
    credentials = await api.put(
        "/v1/subscribers/lin-42/credentials", json={"providerId": "slack", "credentials": {"webhookUrl": secret_url}}
    )
    assert credentials.status_code == 200, credentials.text
    assert (await api.patch("/v1/subscribers/lin-42/online-status", json={"isOnline": True})).status_code == 200
    assert (await api.post("/v1/topics/gardeners/subscribers", json={"subscribers": ["lin-42"]})).status_code == 200
    viewer = await console_as("viewer")
    page = await viewer.get("/console/subscribers/lin-42")
    assert page.status_code == 200, page.text
    text = page.text
    assert "lin@example.com" in text and "en-GB" in text and "Online now" in text and "gold" in text
    assert "slack" in text and "webhookUrl: set" in text
    assert "very-secret-token" not in text and "hooks.slack.example" not in text
    assert "All workflows" in text and "Garden news" in text and "/console/topics/gardeners" in text
    # Recent messages with their states, newest first, each linking to its run.
    assert "The newest 2 of 2" in text and "error: Mailbox full" in text and "(read)" in text
    assert text.index("Mailbox full") < text.index("(read)")
    assert (await viewer.get("/console/subscribers/nobody-here")).status_code == 404


async def test_an_import_creates_updates_and_names_each_refused_line_by_its_number(
    app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient
) -> None:
    await add_subscriber(api, "known-1", email="old@example.com", firstName="Old")
    author = await console_as("author")
    form = await author.get("/console/subscribers/import")
    assert 'name="file"' in form.text and 'type="file"' in form.text and ">Import</button>" in form.text
    content = (
        b"subscriberId,email,firstName,lastName,phone,locale,avatar,data.plan\n"
        b"new-1,new1@example.com,Nia,Nyong,+15550000001,en-US,https://example.com/a.png,gold\n"
        b"known-1,known@example.com,,,,,,\n"
        b"bad-email,not-an-email,,,,,,\n"
        b",nobody@example.com,,,,,,\n"
        b"new-2,,Two,,,xx_not_a_locale,,\n"
        b"bad id with spaces,x@example.com,,,,,,\n"
        b"new-3,,Three,,,,,\n"
        b"new-1,,,,,,,silver\n"
    )
    import_id, page = await imported(app, author, content)
    assert page.status_code == 200
    assert "Import complete" in page.text
    # new-1 is named twice: created, then updated.
    assert re.search(r'id="import-created">2<', page.text) and re.search(r'id="import-updated">2<', page.text)
    assert re.search(r'id="import-refused">4<', page.text)
    for line in (4, 5, 6, 7):
        assert f"Line {line}</th>" in page.text, line
    assert not re.search(r"Line (2|3|8|9)</th>", page.text)
    assert "must be an email address" in page.text and "subscriberId is empty" in page.text
    # What was imported is stored as the API reads it.
    created = (await api.get("/v1/subscribers/new-1")).json()["data"]
    assert (created["email"], created["lastName"], created["locale"], created["data"]) == ("new1@example.com", "Nyong", "en-US", {"plan": "silver"})
    known = (await api.get("/v1/subscribers/known-1")).json()["data"]
    assert (known["email"], known["firstName"]) == ("known@example.com", "Old")  # an empty cell keeps the value
    assert known["__v"] == 1 and known["updatedAt"] > known["createdAt"]
    # Listed among the environment's imports, and in the audit log with who started it.
    listing = await author.get("/console/subscribers/import")
    assert f"/console/subscribers/import/{import_id}" in listing.text
    audit = await author.get("/console/audit", params={"action": "subscriber_import"})
    assert "subscriber_import.started" in audit.text and "subscriber_import.completed" in audit.text
    assert author.member is not None and author.member.email in audit.text


async def test_a_file_that_cannot_be_imported_says_why_in_one_line(console_as: ConsoleAs) -> None:
    author = await console_as("author")
    await author.get("/console/subscribers/import")
    cases = {
        b"email,firstName\nx@example.com,X\n": "subscriberId among them",
        b"subscriberId,shoeSize\na,42\n": "Unknown columns: shoeSize",
        b"subscriberId\n": "no subscribers after its header",
        b"": "Choose a CSV file",
        b"subscriberId\n\xff\xfe\n": "not UTF-8",
    }
    for content, message in cases.items():
        refused = await upload(author, content)
        assert refused.status_code == 422, content
        assert message in refused.text, (content, refused.text[:200])
        assert "Traceback" not in refused.text
    too_large = await upload(author, b"subscriberId\n" + b"a\n" * (imports.MAX_FILE_BYTES // 2 + 1))
    assert too_large.status_code == 422 and "larger than 25 MB" in too_large.text


async def test_roles_an_author_may_import_a_viewer_may_not(app: FastAPI, console_as: ConsoleAs) -> None:
    viewer = await console_as("viewer")
    page = await viewer.get("/console/subscribers/import")
    assert page.status_code == 200 and 'name="file"' not in page.text and "cannot import" in page.text
    refused = await upload(viewer, b"subscriberId\nviewer-made\n")
    assert refused.status_code == 403 and "Your role (viewer) does not allow subscribers.import" in refused.text
    for role in ("author", "admin", "owner"):
        client = await console_as(role)
        await client.get("/console/subscribers/import")
        _, done = await imported(app, client, f"subscriberId\n{role}-made\n".encode())
        assert "Import complete" in done.text, role
    listing = await viewer.get("/console/subscribers", params={"search": "viewer-made"})
    assert ">viewer-made<" not in listing.text


async def test_an_import_without_the_csrf_token_is_refused(console_as: ConsoleAs) -> None:
    author = await console_as("author")
    await author.get("/console/subscribers/import")
    for token in ("", "forged"):
        refused = await upload(author, b"subscriberId\nforged-1\n", csrf=token)
        assert refused.status_code == 403
    listing = await author.get("/console/subscribers/import")
    assert "people.csv" not in listing.text


async def test_the_progress_streams_events_and_the_page_refreshes_without_script(app: FastAPI, console_as: ConsoleAs) -> None:
    author = await console_as("author")
    await author.get("/console/subscribers/import")
    rows = "".join(f"stream-{n}\n" for n in range(imports.BATCH_ROWS * 2 + 5))
    started = await upload(author, ("subscriberId\n" + rows).encode())
    found = IMPORT_PATH.search(started.headers["location"])
    assert found is not None
    import_id = found.group(1)
    # Before its task has begun, the page refreshes itself for browsers without script.
    waiting = await author.get(f"/console/subscribers/import/{import_id}")
    if "Import complete" not in waiting.text:
        assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in waiting.text
    events: list[str] = []
    async with author.client.stream("GET", f"/console/subscribers/import/{import_id}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                events.append(line.removeprefix("event: "))
    assert events[-1] == "done"
    await imports.runner_of(app.state).wait(import_id)
    done = await author.get(f"/console/subscribers/import/{import_id}")
    assert "Import complete" in done.text and 'http-equiv="refresh"' not in done.text
    fragment = await author.get(f"/console/subscribers/import/{import_id}/progress")
    assert fragment.status_code == 200 and 'data-import-finished="yes"' in fragment.text
    assert re.search(rf'id="import-created">{imports.BATCH_ROWS * 2 + 5}<', fragment.text)


async def test_an_import_whose_process_stopped_is_taken_up_where_it_stopped(app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from herald.kit.auth import Principal
    from herald.kit.time import utcnow
    from herald.models import SubscriberImport

    author = await console_as("author")
    principal = Principal(tenancy.environment_id, tenancy.organization_id, api_key_id="")
    content = ("subscriberId\n" + "".join(f"resumed-{n}\n" for n in range(imports.BATCH_ROWS + 10))).encode()
    async with app.state.sessionmaker() as session:
        row = await imports.start_import(session, principal, filename="left.csv", content=content, member_email=None)
        await session.commit()
    # As if a process had written the first batch, then died an hour ago.
    async with app.state.sessionmaker() as session:
        await session.execute(
            update(SubscriberImport)
            .where(SubscriberImport.id == row.id)
            .values(status="running", processed_rows=imports.BATCH_ROWS, created_count=imports.BATCH_ROWS, updated_at=utcnow() - timedelta(hours=1))
        )
        await session.commit()
    await author.get(f"/console/subscribers/import/{row.id}")
    await imports.runner_of(app.state).wait(row.id)
    done = await author.get(f"/console/subscribers/import/{row.id}")
    assert "Import complete" in done.text
    # Only the lines after the first batch were written by the resumed task.
    assert re.search(rf'id="import-created">{imports.BATCH_ROWS + 10}<', done.text)
    listing = await author.get("/console/subscribers", params={"search": f"resumed-{imports.BATCH_ROWS + 9}"})
    assert f">resumed-{imports.BATCH_ROWS + 9}<" in listing.text
    assert ">resumed-0<" not in (await author.get("/console/subscribers", params={"search": "resumed-0"})).text


@pytest.mark.parametrize("path", ["/console/subscribers", "/console/subscribers/import"])
async def test_the_subscribers_pages_need_a_session(anonymous_console: ConsoleClient, path: str) -> None:
    answer = await anonymous_console.get(path)
    assert answer.status_code == 303 and answer.headers["location"].startswith("/console/sign-in")


async def test_a_worker_takes_up_an_import_whose_process_stopped(app: FastAPI, console_as: ConsoleAs, tenancy: Tenancy) -> None:
    from datetime import timedelta

    from sqlalchemy import update

    from herald.app import build_worker
    from herald.kit.auth import Principal
    from herald.kit.time import utcnow
    from herald.models import SubscriberImport

    principal = Principal(tenancy.environment_id, tenancy.organization_id, api_key_id="")
    async with app.state.sessionmaker() as session:
        row = await imports.start_import(session, principal, filename="orphan.csv", content=b"subscriberId\norphan-1\norphan-2\n", member_email=None)
        await session.commit()
    # Its process died before it began: nobody opens its page.
    async with app.state.sessionmaker() as session:
        await session.execute(update(SubscriberImport).where(SubscriberImport.id == row.id).values(updated_at=utcnow() - timedelta(minutes=5)))
        await session.commit()
    worker = build_worker(app.state.settings, app.state.sessionmaker)
    try:
        assert await worker.take_up_stalled_imports() >= 1
        await worker.imports.wait(row.id)
        # Taken once: a second sweep finds nothing of it to take.
        assert row.id not in worker.imports.tasks
    finally:
        if worker.http is not None:
            await worker.http.aclose()
    author = await console_as("author")
    done = await author.get(f"/console/subscribers/import/{row.id}")
    assert "Import complete" in done.text and re.search(r'id="import-created">2<', done.text)


@pytest.mark.parametrize("role", ["owner", "admin", "author", "viewer"])
async def test_every_role_against_the_subscriber_and_topic_actions(app: FastAPI, console_as: ConsoleAs, api: httpx.AsyncClient, role: str) -> None:
    await add_subscriber(api, f"matrix-{role}")
    client = await console_as(role)
    reads = [
        await client.get("/console/subscribers"),
        await client.get(f"/console/subscribers/matrix-{role}"),
        await client.get("/console/subscribers/import"),
        await client.get("/console/topics"),
    ]
    assert [answer.status_code for answer in reads] == [200] * 4
    for answer in reads:  # nothing the Content-Security-Policy would refuse
        assert not re.search(r"<script(?![^>]*\bsrc=)", answer.text) and " style=" not in answer.text, answer.request.url
    may_change = role != "viewer"
    started = await upload(client, f"subscriberId\nmatrix-{role}-imported\n".encode())
    assert started.status_code == (303 if may_change else 403)
    if may_change:
        found = IMPORT_PATH.search(started.headers["location"])
        assert found is not None
        await imports.runner_of(app.state).wait(found.group(1))
    topic = await client.post_form("/console/topics", {"key": f"matrix-{role}", "name": role})
    assert topic.status_code == (303 if may_change else 403)
    key = f"matrix-{role}" if may_change else "matrix-shared"
    if not may_change:
        assert (await api.post(f"/v1/topics/{key}/subscribers", json={"subscribers": [f"matrix-{role}"]})).status_code == 200
    added = await client.post_form(f"/console/topics/{key}/subscribers", {"subscriberIds": f"matrix-{role}"})
    removed = await client.post_form(f"/console/topics/{key}/subscribers/remove", {"subscriberId": f"matrix-{role}"})
    assert (added.status_code, removed.status_code) == ((303, 303) if may_change else (403, 403))
    members = (await api.get(f"/v1/topics/{key}")).json()["data"]["subscribers"]
    assert members == ([] if may_change else [f"matrix-{role}"])


async def test_an_author_cannot_import_into_a_protected_environment(console_as: ConsoleAs, tenancy: Tenancy) -> None:
    author = await console_as("author")
    chosen = await author.post_form("/console/environment", {"environment": tenancy.production_environment_id, "next": "/console/subscribers/import"})
    assert chosen.status_code == 303
    page = await author.get("/console/subscribers/import")
    assert 'name="file"' not in page.text
    refused = await upload(author, b"subscriberId\nin-production\n")
    assert refused.status_code == 403 and "protected" in refused.text
