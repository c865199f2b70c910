"""The workflow editor, in process: round trips keep what it does not show, roles, CSRF, broken templates, previews, test sends."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from typing import Any

import httpx
from fastapi import FastAPI

from herald.console.routes.editor import example_payload
from herald.models import Workflow
from tests.conftest import Tenancy
from tests.console.test_activity import style_hash
from tests.fixtures.builders import create_subscriber, create_workflow, unique
from tests.fixtures.console import ConsoleAs, ConsoleClient
from tests.translations.helpers import translated_workflow

FILTERS = [
    {
        "isNegated": False,
        "type": "STATEMENT",
        "value": "AND",
        "children": [{"on": "payload", "field": "plan", "value": "pro", "operator": "EQUAL"}],
    }
]
CTA = {
    "type": "redirect",
    "data": {"url": "https://example.com/orders"},
    "action": {"buttons": [{"type": "primary", "content": "Open"}]},
}


class _EditorForm(HTMLParser):
    """The fields the editor's form would submit, as a browser fills them in (checked boxes, selected options)."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self._in_form = False
        self._textarea: str | None = None
        self._text = ""
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "form":
            self._in_form = found.get("id") == "editor-form"
        if not self._in_form or "name" not in found and tag != "option":
            return
        if tag == "input" and found.get("type") == "checkbox":
            if "checked" in found:
                self.fields.append((found["name"], "on"))
        elif tag == "input":
            self.fields.append((found["name"], found.get("value", "")))
        elif tag == "textarea":
            self._textarea, self._text = found["name"], ""
        elif tag == "select":
            self._select = found["name"]
        elif tag == "option" and self._select is not None and "selected" in found:
            self.fields.append((self._select, found.get("value", "")))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None:
            self.fields.append((self._textarea, self._text.removeprefix("\n")))
            self._textarea = None
        elif tag == "select":
            self._select = None
        elif tag == "form":
            self._in_form = False


def editor_fields(page: httpx.Response) -> dict[str, str]:
    assert page.status_code == 200, page.text
    parser = _EditorForm()
    parser.feed(page.text)
    return dict(parser.fields)


async def save(client: ConsoleClient, workflow_id: str, fields: dict[str, str], action: str = "save") -> httpx.Response:
    return await client.post_form(f"/console/workflows/{workflow_id}/edit", {**fields, "action": action})


async def stored(api: httpx.AsyncClient, workflow_id: str) -> dict[str, Any]:
    response = await api.get(f"/v1/workflows/{workflow_id}")
    assert response.status_code == 200, response.text
    return response.json()["data"]


async def test_a_round_trip_keeps_what_the_editor_does_not_show(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    workflow = await create_workflow(
        api,
        tags=["orders"],
        critical=True,
        severity="high",
        data={"team": "billing"},
        preferenceSettings={"email": False, "sms": True, "in_app": True, "chat": True, "push": True},
        steps=[
            {
                "name": "inbox",
                "filters": FILTERS,
                "template": {"type": "in_app", "content": "Hello {{payload.name}}", "cta": CTA},
            },
            {
                "name": "wait",
                "template": {"type": "delay"},
                "metadata": {"type": "regular", "amount": 2, "unit": "hours"},
            },
            {
                "name": "mail",
                "template": {
                    "type": "email",
                    "subject": "Hi",
                    "content": [{"type": "text", "content": "Block {{name}}"}],
                },
            },
        ],
    )
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert fields["steps-0-content"] == "Hello {{payload.name}}"
    assert "steps-2-content" not in fields  # blocks: not shown, kept
    fields["steps-0-content"] = "Bonjour {{payload.name}}"
    fields["steps-1-amount"] = "3"

    answer = await save(author, workflow["_id"], fields)

    assert answer.status_code == 303, answer.text
    after = await stored(api, workflow["_id"])
    before_steps, after_steps = workflow["steps"], after["steps"]
    assert after_steps[0]["template"]["content"] == "Bonjour {{payload.name}}"
    assert after_steps[1]["metadata"] == {**before_steps[1]["metadata"], "amount": 3}
    assert after_steps[0]["filters"] == before_steps[0]["filters"]
    assert after_steps[0]["template"]["cta"] == before_steps[0]["template"]["cta"]
    assert after_steps[2]["template"]["content"] == before_steps[2]["template"]["content"]
    assert [step["_id"] for step in after_steps] == [step["_id"] for step in before_steps]
    for key in ("tags", "critical", "severity", "data", "preferenceSettings", "name"):
        assert after[key] == workflow[key], key
    assert after["triggers"][0]["identifier"] == workflow["triggers"][0]["identifier"]


async def test_a_v2_workflow_keeps_its_controls(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    created = await api.post(
        "/v2/workflows",
        json={
            "name": unique("v2"),
            "workflowId": unique("v2-flow"),
            "steps": [
                {
                    "name": "Mail",
                    "type": "email",
                    "controlValues": {"subject": "S", "body": "<p>B</p>", "skip": {"==": [1, 2]}},
                }
            ],
        },
    )
    assert created.status_code == 201, created.text
    workflow_id = created.json()["data"]["_id"]
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow_id}/edit"))
    fields["steps-0-subject"] = "New subject"

    assert (await save(author, workflow_id, fields)).status_code == 303

    step = (await api.get(f"/v2/workflows/{workflow_id}")).json()["data"]["steps"][0]
    assert step["controls"]["values"]["subject"] == "New subject"
    assert step["controls"]["values"]["skip"] == {"==": [1, 2]}


async def test_steps_are_added_moved_turned_off_and_removed(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    page = await save(author, workflow["_id"], fields, "add:sms")
    fields = editor_fields(page)
    fields["steps-1-content"] = "Code {{payload.code}}"
    fields = editor_fields(await save(author, workflow["_id"], fields, "up:1"))
    fields.pop("steps-1-active")  # the in-app step, now second, turned off
    fields = editor_fields(await save(author, workflow["_id"], fields, "add:digest"))
    fields = editor_fields(await save(author, workflow["_id"], fields, "remove:2"))

    assert (await save(author, workflow["_id"], fields)).status_code == 303

    steps = (await stored(api, workflow["_id"]))["steps"]
    assert [(step["template"]["type"], step["active"]) for step in steps] == [("sms", True), ("in_app", False)]
    assert steps[0]["template"]["content"] == "Code {{payload.code}}"
    assert steps[1]["_id"] == workflow["steps"][0]["_id"]


async def test_a_template_that_does_not_parse_is_refused_with_its_line_and_column(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["steps-0-content"] = "Hello\n{% if %}"

    answer = await save(author, workflow["_id"], fields)

    assert answer.status_code == 422
    assert "Step 1, content: template syntax error" in answer.text
    assert "at line 2, column" in answer.text
    assert (await stored(api, workflow["_id"]))["steps"][0]["template"]["content"] == "Hello {{payload.name}}"
    fields["steps-0-content"] = "Hello {{ payload.name | no_such_filter }}"
    answer = await save(author, workflow["_id"], fields)
    assert answer.status_code == 422
    assert "unknown filter" in html.unescape(answer.text)


async def test_a_viewer_reads_the_editor_without_save_and_cannot_post(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    viewer = await console_as("viewer")
    page = await viewer.get(f"/console/workflows/{workflow['_id']}/edit")
    assert page.status_code == 200
    assert 'value="save"' not in page.text
    assert "Add step" not in page.text
    fields = editor_fields(page)
    fields["steps-0-content"] = "Changed"

    assert (await save(viewer, workflow["_id"], fields)).status_code == 403
    assert (await save(viewer, workflow["_id"], fields, "add:sms")).status_code == 403
    assert (await viewer.post_form("/console/workflows/new", {"name": "Nope"})).status_code == 403
    assert (await stored(api, workflow["_id"]))["steps"][0]["template"]["content"] == "Hello {{payload.name}}"


async def test_saving_without_the_csrf_token_is_refused(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields.pop("csrf_token")
    answer = await author.client.post(f"/console/workflows/{workflow['_id']}/edit", data={**fields, "action": "save"})
    assert answer.status_code == 403
    answer = await author.client.post(
        f"/console/workflows/{workflow['_id']}/edit/preview", data={**fields, "preview_step": "0"}
    )
    assert answer.status_code == 403


async def test_new_workflow_opens_the_editor_and_is_audited(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    author = await console_as("author")
    page = await author.get("/console/workflows/new")
    assert 'for="name">Name<' in page.text and ">Create<" in page.text
    name = unique("Order shipped")
    answer = await author.post_form("/console/workflows/new", {"name": name})
    assert answer.status_code == 303
    location = answer.headers["location"]
    assert re.fullmatch(r"/console/workflows/[0-9a-f]+/edit", location)
    editor = await author.get(location)
    assert editor.status_code == 200 and html.escape(name) in editor.text
    assert editor_fields(editor)["active"] == "on"
    audit = (await api.get("/v1/audit-logs")).json()["data"]
    assert any(
        entry["action"] == "workflow.created" and entry["actor"]["email"] == author.member.email for entry in audit
    )
    assert (await author.post_form("/console/workflows/new", {"name": ""})).status_code == 422


async def preview(client: ConsoleClient, workflow_id: str, fields: dict[str, str], step: int) -> httpx.Response:
    return await client.post_form(
        f"/console/workflows/{workflow_id}/edit/preview", {**fields, "preview_step": str(step)}
    )


async def test_the_preview_renders_each_channel_with_the_payload_subscriber_and_variables(
    api: httpx.AsyncClient, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    for key, value, secret in (("BASE_URL", "https://shop.example", False), ("TOKEN", "s3cret-value", True)):
        body = {"key": key, "isSecret": secret, "values": [{"_environmentId": tenancy.environment_id, "value": value}]}
        assert (await api.post("/v1/environment-variables", json=body)).status_code == 200
    subscriber = await create_subscriber(api, firstName="Grace")
    workflow = await create_workflow(
        api,
        steps=[
            {
                "name": "mail",
                "template": {
                    "type": "email",
                    "subject": "Hi {{subscriber.firstName}}",
                    "content": '<p style="color:red">{{payload.name}} {{env.BASE_URL}} {{env.TOKEN}}</p><script>alert(1)</script>',
                },
            },
            {"name": "text", "template": {"type": "sms", "content": "Code {{payload.code}}"}},
            {"name": "inbox", "template": {"type": "in_app", "content": "Hello {{payload.name}}"}},
        ],
    )
    viewer = await console_as("viewer")
    fields = editor_fields(await viewer.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["test_payload"] = '{"name": "Ada", "code": "' + "x" * 200 + '"}'
    fields["preview_subscriber"] = subscriber["subscriberId"]

    # Without the script: the page itself, the email in a sandboxed srcdoc frame, its styles allowed by their hashes.
    page = await viewer.post_form(f"/console/workflows/{workflow['_id']}/edit", {**fields, "action": "preview:0"})
    assert page.status_code == 200, page.text
    frame = re.search(r"<iframe[^>]*>", page.text)
    assert frame is not None and " sandbox " in frame.group(0) and "allow-scripts" not in frame.group(0)
    assert "Hi Grace" in page.text
    srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', frame.group(0)).group(1))
    assert "Ada https://shop.example" in srcdoc
    assert "s3cret-value" not in page.text and "\u2022" in srcdoc
    assert style_hash("color:red") in page.headers["content-security-policy"]
    # With the script: the region's fragment, its frame left for the script to fill.
    fragment = await preview(viewer, workflow["_id"], fields, 0)
    assert "Hi Grace" in fragment.text and "srcdoc" not in fragment.text
    assert re.search(r'<iframe class="email-preview" sandbox name="email-preview-0" data-email-frame=', fragment.text)

    fields["test_payload"] = '{"name": "O\'Brien & <Sons>", "code": "' + "x" * 200 + '"}'
    inbox = await preview(viewer, workflow["_id"], fields, 2)
    assert "<p data-preview-body>Hello O&#39;Brien &amp; &lt;Sons&gt;</p>" in inbox.text
    fields["test_payload"] = '{"name": "Ada", "code": "' + "x" * 200 + '"}'

    sms = await preview(viewer, workflow["_id"], fields, 1)
    assert "Code " + "x" * 200 in sms.text
    assert "205 characters, 2 segments" in sms.text

    # The frame the editor's script fills: the email alone, with its own styles and no script, framed by the console only.
    frame = await viewer.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email", {**fields, "preview_step": "0"}
    )
    assert frame.status_code == 200
    assert 'style="color:red"' in frame.text and "Ada https://shop.example" in frame.text
    policy = frame.headers["content-security-policy"]
    assert "sandbox" in policy and "script-src" not in policy and "default-src 'none'" in policy
    assert "frame-ancestors 'self'" in policy and frame.headers["x-frame-options"] == "SAMEORIGIN"

    fields["steps-1-content"] = "Code {{ payload.code | nope }}"
    broken = await preview(viewer, workflow["_id"], fields, 1)
    assert "unknown filter" in html.unescape(broken.text) and "line 1, column" in broken.text
    fields["test_payload"] = "{not json"
    assert "Test payload is not JSON" in (await preview(viewer, workflow["_id"], fields, 0)).text


async def test_the_preview_uses_the_default_layout_and_the_workflows_translations(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    layout = await api.post(
        "/v1/layouts",
        json={
            "name": unique("frame"),
            "identifier": unique("frame"),
            "content": "<div>FRAME {{{body}}} END</div>",
            "isDefault": True,
        },
    )
    assert layout.status_code == 201, layout.text
    workflow = await translated_workflow(
        app,
        api,
        tenancy.environment_id,
        steps=[
            {"name": "mail", "template": {"type": "email", "subject": "{{t.title}}", "content": "<p>{{t.body}}</p>"}}
        ],
    )
    identifier = workflow["triggers"][0]["identifier"]
    for locale, content in (
        ("en_US", {"title": "Welcome", "body": "Hello {{payload.name}}"}),
        ("fr_FR", {"title": "Bienvenue", "body": "Bonjour {{payload.name}}"}),
    ):
        body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": content}
        assert (await api.post("/v2/translations", json=body)).status_code == 200
    french = await create_subscriber(api, locale="fr_FR")
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["test_payload"] = '{"name": "Ada"}'

    answer = await author.post_form(f"/console/workflows/{workflow['_id']}/edit", {**fields, "action": "preview:0"})

    assert answer.status_code == 200
    assert "Welcome" in answer.text
    srcdoc = html.unescape(re.search(r'srcdoc="([^"]*)"', answer.text).group(1))
    assert "FRAME <p>Hello Ada</p> END" in srcdoc
    fields["preview_subscriber"] = french["subscriberId"]
    answer = await preview(author, workflow["_id"], fields, 0)
    assert "Bienvenue" in answer.text
    frame = await author.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email", {**fields, "preview_step": "0"}
    )
    assert "FRAME <p>Bonjour Ada</p> END" in frame.text


async def test_send_test_triggers_the_workflow_and_links_its_run(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    workflow = await create_workflow(api)
    subscriber = await create_subscriber(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["test_payload"] = '{"name": "Ada"}'

    missing = await save(author, workflow["_id"], fields, "test")
    assert missing.status_code == 422 and "Enter the subscriber ID" in missing.text

    fields["test_subscriber"] = subscriber["subscriberId"]
    sent = await save(author, workflow["_id"], fields, "test")
    assert sent.status_code == 200, sent.text
    link = re.search(r'href="(/console/workflows/[0-9a-f]+/runs/([^"]+))" data-test-run', sent.text)
    assert link is not None
    follow = await author.get(link.group(1))
    assert follow.status_code == 303
    # The engine has not run it (no worker here): Activity, searched for the transaction, until it has.
    assert follow.headers["location"] == f"/console/activity?search={link.group(2)}"
    audit = (await api.get("/v1/audit-logs")).json()["data"]
    assert any(entry["action"] == "workflow.test_sent" for entry in audit)


async def test_a_stored_template_that_does_not_render_shows_its_error_when_opened(
    app: FastAPI, api: httpx.AsyncClient, console_as: ConsoleAs, tenancy: Tenancy
) -> None:
    workflow = await create_workflow(api)
    # Written straight to the store, as a workflow saved before templates were checked.
    async with app.state.sessionmaker() as session:
        stored_row = await session.get(Workflow, workflow["_id"])
        assert stored_row is not None
        steps = [dict(step) for step in stored_row.steps]
        steps[0] = {**steps[0], "template": {**steps[0]["template"], "content": "Hi {% if payload.x %}"}}
        stored_row.steps = steps
        await session.commit()
    author = await console_as("author")

    page = await author.get(f"/console/workflows/{workflow['_id']}/edit")

    assert page.status_code == 200
    assert 'class="error-summary"' in page.text
    assert 'href="#steps-0-content">Step 1, content: template syntax error' in html.unescape(page.text)


def test_the_test_payload_starts_from_the_schemas_examples_else_from_the_variables() -> None:
    schema = {
        "type": "object",
        "properties": {"order": {"type": "string", "examples": ["A-1"]}, "vip": {"default": True}},
    }
    assert example_payload({"examples": [{"order": "B-2"}]}, ["ignored"]) == {"order": "B-2"}
    assert example_payload(schema, ["ignored"]) == {"order": "A-1", "vip": True}
    assert example_payload(None, ["order.id", "order.total", "name"]) == {
        "order": {"id": "order.id", "total": "order.total"},
        "name": "name",
    }


async def test_conditions_are_edited_as_rows_and_the_rest_of_each_group_is_kept(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    groups = [
        {
            "isNegated": True,
            "type": "STATEMENT",
            "value": "OR",
            "children": [
                {"on": "payload", "field": "plan", "value": "pro", "operator": "EQUAL"},
                {"on": "subscriber", "field": "locale", "value": "fr", "operator": "LIKE"},
            ],
        },
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [{"on": "tenant", "field": "name", "value": "acme", "operator": "NOT_EQUAL"}],
        },
    ]
    workflow = await create_workflow(
        api, steps=[{"name": "inbox", "filters": groups, "template": {"type": "in_app", "content": "Hi"}}]
    )
    author = await console_as("author")
    page = await author.get(f"/console/workflows/{workflow['_id']}/edit")
    fields = editor_fields(page)
    assert fields["steps-0-filters-0-1-on"] == "subscriber" and fields["steps-0-filters-0-1-operator"] == "LIKE"
    assert fields["steps-0-filters-0-match"] == "OR" and fields["steps-0-filters-1-0-value"] == "acme"
    # Every one of the 14 operators is offered, in words.
    for operator in (
        "LARGER",
        "SMALLER_EQUAL",
        "ALL_IN",
        "ANY_IN",
        "NOT_IN",
        "BETWEEN",
        "NOT_BETWEEN",
        "NOT_LIKE",
        "IN",
    ):
        assert f'<option value="{operator}"' in page.text

    # As the script leaves the form: row 0-0 removed, a row added with the next number, one value changed.
    for part in ("on", "field", "operator", "value"):
        fields.pop(f"steps-0-filters-0-0-{part}")
    fields.update(
        {
            "steps-0-filters-0-2-on": "payload",
            "steps-0-filters-0-2-field": "total",
            "steps-0-filters-0-2-operator": "BETWEEN",
            "steps-0-filters-0-2-value": "10,20",
            "steps-0-filters-1-0-value": "globex",
        }
    )
    assert (await save(author, workflow["_id"], fields)).status_code == 303

    saved = (await stored(api, workflow["_id"]))["steps"][0]["filters"]
    assert saved == [
        {
            "isNegated": True,
            "type": "STATEMENT",
            "value": "OR",
            "children": [
                {"on": "subscriber", "field": "locale", "value": "fr", "operator": "LIKE"},
                {"on": "payload", "field": "total", "value": "10,20", "operator": "BETWEEN"},
            ],
        },
        {**groups[1], "children": [{**groups[1]["children"][0], "value": "globex"}]},
    ]


async def test_conditions_are_added_and_removed_without_the_script(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert "steps-0-filters-0-0-field" not in fields

    fields = editor_fields(await save(author, workflow["_id"], fields, "condition:0"))
    fields.update({"steps-0-filters-0-0-field": "plan", "steps-0-filters-0-0-value": "pro"})
    fields = editor_fields(await save(author, workflow["_id"], fields, "condition:0"))
    assert fields["steps-0-filters-0-1-field"] == ""  # the new row, blank: left out when saved
    fields.update(
        {
            "steps-0-filters-0-1-field": "vip",
            "steps-0-filters-0-1-operator": "NOT_EQUAL",
            "steps-0-filters-0-1-value": "no",
        }
    )
    fields = editor_fields(await save(author, workflow["_id"], fields, "uncondition:0.0.0"))
    assert (await save(author, workflow["_id"], fields)).status_code == 303

    saved = (await stored(api, workflow["_id"]))["steps"][0]["filters"]
    assert saved == [
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [{"on": "payload", "field": "vip", "value": "no", "operator": "NOT_EQUAL"}],
        }
    ]


async def test_in_app_actions_are_edited_and_what_else_a_button_holds_is_kept(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    cta = {
        "type": "redirect",
        "data": {"url": "https://example.com/orders"},
        "action": {"status": "pending", "buttons": [{"type": "primary", "content": "Open", "resultContent": "Opened"}]},
    }
    workflow = await create_workflow(
        api,
        steps=[
            {
                "name": "inbox",
                "template": {"type": "in_app", "content": "Hi", "avatar": "https://a.example/x.png", "cta": cta},
            }
        ],
    )
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert fields["steps-0-primary-label"] == "Open" and fields["steps-0-secondary-label"] == ""
    assert fields["steps-0-avatar"] == "https://a.example/x.png"
    fields.update(
        {
            "steps-0-primary-label": "Track {{payload.order}}",
            "steps-0-primary-url": "https://example.com/track",
            "steps-0-secondary-label": "Later",
        }
    )
    fields["test_payload"] = '{"order": "A-1"}'
    shown = await preview(author, workflow["_id"], fields, 0)
    assert "Track A-1" in shown.text and "Later" in shown.text

    assert (await save(author, workflow["_id"], fields)).status_code == 303

    saved = (await stored(api, workflow["_id"]))["steps"][0]["template"]["cta"]
    assert saved["data"] == cta["data"] and saved["action"]["status"] == "pending"
    assert saved["action"]["buttons"] == [
        {
            "type": "primary",
            "content": "Track {{payload.order}}",
            "resultContent": "Opened",
            "url": "https://example.com/track",
        },
        {"type": "secondary", "content": "Later"},
    ]
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["steps-0-primary-label"] = fields["steps-0-secondary-label"] = ""
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    saved = (await stored(api, workflow["_id"]))["steps"][0]["template"]["cta"]
    assert saved["action"] == {"status": "pending"} and saved["data"] == cta["data"]


async def test_settings_keep_preferences_and_a_payload_schema_the_trigger_is_checked_against(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(
        api, preferenceSettings={"email": False, "sms": True, "in_app": True, "chat": True, "push": True}
    )
    subscriber = await create_subscriber(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert "preference-email" not in fields and fields["preference-sms"] == "on"
    assert fields["payload_schema"] == "" and "validate_payload" not in fields

    fields["payload_schema"] = '{"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]'
    refused = await save(author, workflow["_id"], fields)
    assert refused.status_code == 422 and "Payload schema is not JSON" in refused.text
    fields["payload_schema"] = '{"type": 12}'
    refused = await save(author, workflow["_id"], fields)
    assert refused.status_code == 422 and "not a valid JSON schema" in refused.text

    schema = {"type": "object", "properties": {"name": {"type": "string", "examples": ["Ada"]}}, "required": ["name"]}
    fields["payload_schema"] = json.dumps(schema)
    fields["validate_payload"] = "on"
    fields.pop("preference-chat")
    assert (await save(author, workflow["_id"], fields)).status_code == 303

    after = await stored(api, workflow["_id"])
    assert after["preferenceSettings"] == {"email": False, "sms": True, "in_app": True, "chat": False, "push": True}
    v2 = (await api.get(f"/v2/workflows/{workflow['_id']}")).json()["data"]
    assert v2["payloadSchema"] == schema and v2["validatePayload"] is True
    # The test payload now starts from the schema's examples.
    assert json.loads(
        editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))["test_payload"]
    ) == {"name": "Ada"}
    identifier = workflow["triggers"][0]["identifier"]
    wrong = await api.post(
        "/v1/events/trigger", json={"name": identifier, "to": subscriber["subscriberId"], "payload": {}}
    )
    assert wrong.status_code == 400, wrong.text
    right = await api.post(
        "/v1/events/trigger", json={"name": identifier, "to": subscriber["subscriberId"], "payload": {"name": "Ada"}}
    )
    assert right.status_code == 201, right.text


async def test_action_steps_are_saved_as_added_and_keep_only_what_their_kind_takes(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    for kind in ("digest", "delay", "throttle"):
        fields = editor_fields(await save(author, workflow["_id"], fields, f"add:{kind}"))
    assert fields["steps-1-type"] == "digest" and fields["steps-1-kind"] == "regular"
    fields.update({"steps-1-digestKey": "orderId", "steps-2-amount": "2", "steps-3-threshold": "3"})
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    steps = (await stored(api, workflow["_id"]))["steps"]
    assert [step["template"]["type"] for step in steps] == ["in_app", "digest", "delay", "throttle"]
    assert steps[1]["metadata"] == {"type": "regular", "amount": 5, "unit": "minutes", "digestKey": "orderId"}
    assert steps[2]["metadata"] == {"type": "regular", "amount": 2, "unit": "minutes"}
    assert steps[3]["metadata"] == {"type": "fixed", "amount": 1, "unit": "hours", "threshold": 3}

    # Each changes kind: what the new kind does not take (the delay's amount and unit) is left out.
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields.update(
        {
            "steps-1-kind": "timed",
            "steps-1-atTime": "09:30",
            "steps-1-weekDays": "Monday, friday",
            "steps-2-kind": "scheduled",
            "steps-2-delayPath": "sendAt",
            "steps-3-kind": "dynamic",
            "steps-3-dynamicKey": "window",
        }
    )
    assert (await save(author, workflow["_id"], fields)).status_code == 303, fields
    steps = (await stored(api, workflow["_id"]))["steps"]
    assert steps[1]["metadata"] == {
        "type": "timed",
        "amount": 5,
        "unit": "minutes",
        "digestKey": "orderId",
        "timed": {"atTime": "09:30", "weekDays": ["monday", "friday"]},
    }
    assert steps[2]["metadata"] == {"type": "scheduled", "delayPath": "sendAt"}
    assert steps[3]["metadata"] == {"type": "dynamic", "dynamicKey": "window", "threshold": 3}
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert fields["steps-1-atTime"] == "09:30" and fields["steps-1-weekDays"] == "monday, friday"
    fields["steps-1-atTime"] = "25:00"
    refused = await save(author, workflow["_id"], fields)
    assert refused.status_code == 422 and 'href="#steps-1-atTime"' in refused.text, re.findall(
        r"href=\"#[^\"]*\"[^<]*", refused.text
    )


async def test_an_email_of_blocks_is_edited_block_by_block(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    blocks = [
        {"type": "text", "content": "Hello {{payload.name}}", "styles": {"textAlign": "center"}},
        {"type": "button", "content": "Old", "url": "https://example.com/old"},
    ]
    workflow = await create_workflow(
        api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": blocks}}]
    )
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert (
        fields["steps-0-blocks-0-content"] == "Hello {{payload.name}}" and fields["steps-0-blocks-1-type"] == "button"
    )
    # As the script leaves the form: block 1 removed, a button added with the next number.
    for part in ("type", "content", "url"):
        fields.pop(f"steps-0-blocks-1-{part}")
    fields.update(
        {
            "steps-0-blocks-0-content": "Bonjour {{payload.name}}",
            "steps-0-blocks-2-type": "button",
            "steps-0-blocks-2-content": "Track",
            "steps-0-blocks-2-url": "https://example.com/track/{{payload.name}}",
            "test_payload": '{"name": "Ada"}',
        }
    )
    frame = await author.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email", {**fields, "preview_step": "0"}
    )
    assert "Bonjour Ada" in frame.text and "https://example.com/track/Ada" in frame.text and "Old" not in frame.text

    fields["steps-0-blocks-2-content"] = "Track {{ payload.name | nope }}"
    refused = await save(author, workflow["_id"], fields)
    # Shown again with its rows numbered in order: the added block is the second.
    assert refused.status_code == 422 and 'href="#steps-0-blocks-1-content"' in refused.text
    assert 'id="steps-0-blocks-1-content-error"' in refused.text
    fields["steps-0-blocks-2-content"] = "Track"
    assert (await save(author, workflow["_id"], fields)).status_code == 303

    saved = (await stored(api, workflow["_id"]))["steps"][0]["template"]["content"]
    assert saved == [
        {"type": "text", "content": "Bonjour {{payload.name}}", "styles": {"textAlign": "center"}},
        {"type": "button", "content": "Track", "url": "https://example.com/track/{{payload.name}}"},
    ]
    # Without the script: a block added, then one removed, by the page's buttons.
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields = editor_fields(await save(author, workflow["_id"], fields, "block:0"))
    assert fields["steps-0-blocks-2-content"] == "" and fields["steps-0-blocks-2-type"] == "text"
    fields = editor_fields(await save(author, workflow["_id"], fields, "unblock:0.0"))
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    saved = (await stored(api, workflow["_id"]))["steps"][0]["template"]["content"]
    assert [block["content"] for block in saved] == ["Track", ""]
    # A viewer's page sends no kind (its selects are disabled): the preview takes the stored blocks' kinds.
    viewer = await console_as("viewer")
    fields = editor_fields(await viewer.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields = {name: value for name, value in fields.items() if not re.fullmatch(r"steps-0-blocks-\d+-type", name)}
    frame = await viewer.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email", {**fields, "preview_step": "0"}
    )
    assert "Track" in frame.text and "https://example.com/track/" in frame.text


async def test_an_email_chooses_its_layout_by_name(api: httpx.AsyncClient, console_as: ConsoleAs) -> None:
    names = {}
    for frame, default in (("FIRST", True), ("SECOND", False)):
        identifier = unique(frame.lower())
        body = {
            "name": f"{frame} {identifier}",
            "identifier": identifier,
            "content": f"<div>{frame} {{{{{{body}}}}}}</div>",
            "isDefault": default,
        }
        assert (await api.post("/v1/layouts", json=body)).status_code == 201
        names[frame] = identifier
    workflow = await create_workflow(
        api, steps=[{"name": "mail", "template": {"type": "email", "subject": "S", "content": "<p>Hi</p>"}}]
    )
    author = await console_as("author")
    page = await author.get(f"/console/workflows/{workflow['_id']}/edit")
    assert re.search(r'<option value="" selected>The default layout \(FIRST ', page.text)
    assert f'<option value="{names["SECOND"]}">SECOND {names["SECOND"]} ({names["SECOND"]})</option>' in page.text
    fields = editor_fields(page)
    fields["steps-0-layoutId"] = names["SECOND"]
    frame = await author.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email", {**fields, "preview_step": "0"}
    )
    assert "<div>SECOND <p>Hi</p></div>" in frame.text
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    assert (await stored(api, workflow["_id"]))["steps"][0]["template"]["layoutId"] == names["SECOND"]
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert fields["steps-0-layoutId"] == names["SECOND"]
    fields["steps-0-layoutId"] = "none"
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    assert (await stored(api, workflow["_id"]))["steps"][0]["template"]["layoutId"] is None


async def test_a_long_workflow_is_previewed_and_saved_as_the_script_sends_it(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    step = {
        "name": "inbox",
        "filters": FILTERS,
        "template": {"type": "in_app", "content": "Hi {{payload.name}}", "cta": CTA},
    }
    workflow = await create_workflow(api, steps=[step] * 15)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    assert len(fields) > 250  # beyond what a page's form of a few fields is allowed
    fields.pop("csrf_token")
    fields["test_payload"] = '{"name": "Ada"}'
    headers = {"X-CSRF-Token": author.csrf}
    shown = await author.client.post(
        f"/console/workflows/{workflow['_id']}/edit/preview", data={**fields, "preview_step": "14"}, headers=headers
    )
    assert shown.status_code == 200, shown.text[:300]
    assert "<p data-preview-body>Hi Ada</p>" in shown.text
    fields["steps-14-content"] = "Bye {{payload.name}}"
    saved = await author.client.post(
        f"/console/workflows/{workflow['_id']}/edit", data={**fields, "action": "save"}, headers=headers
    )
    assert saved.status_code == 303, saved.text[:300]
    assert (await stored(api, workflow["_id"]))["steps"][14]["template"]["content"] == "Bye {{payload.name}}"


async def controls_of(api: httpx.AsyncClient, workflow_id: str) -> list[dict[str, Any]]:
    """Each step's ``controlValues`` as the v2 API reads them back."""
    response = await api.get(f"/v2/workflows/{workflow_id}")
    assert response.status_code == 200, response.text
    return [step["controlValues"] for step in response.json()["data"]["steps"]]


HTTP_CONTROLS = {
    "method": "PUT",
    "url": "https://hooks.example.com/orders/{{payload.order}}?token=t",
    "headers": [{"key": "Authorization", "value": "Bearer {{env.TOKEN}}"}, {"key": "X-Trace", "value": " padded"}],
    "body": [{"key": "order", "value": "{{payload.order}}"}],
    "responseBodySchema": {"type": "object", "required": ["ok"]},
    "enforceSchemaValidation": True,
    "continueOnFailure": False,
    "skip": {"==": [1, 2]},
}


async def test_http_request_and_custom_steps_are_edited_by_their_controls_and_kept_on_a_round_trip(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    response = await api.post(
        "/v2/workflows",
        json={
            "name": "Calls",
            "workflowId": unique("calls"),
            "steps": [
                {"name": "Call", "stepId": "call", "type": "http_request", "controlValues": HTTP_CONTROLS},
                {"name": "Tag", "stepId": "tag", "type": "custom", "controlValues": {"custom": {"tier": "<vip>"}}},
            ],
        },
    )
    assert response.status_code == 201, response.text
    workflow_id = response.json()["data"]["_id"]
    author = await console_as("author")
    page = await author.get(f"/console/workflows/{workflow_id}/edit")
    assert 'value="add:http_request"' in page.text and 'value="add:custom"' in page.text
    fields = editor_fields(page)
    assert fields["steps-0-method"] == "PUT" and fields["steps-0-url"] == HTTP_CONTROLS["url"]
    assert fields["steps-0-headers"] == "Authorization: Bearer {{env.TOKEN}}\nX-Trace:  padded"
    assert fields["steps-0-body"] == "order: {{payload.order}}" and fields["steps-0-body-pairs"] == "on"
    assert json.loads(fields["steps-1-controls"]) == {"custom": {"tier": "<vip>"}}
    for step in ("0", "1"):
        shown = await author.post_form(
            f"/console/workflows/{workflow_id}/edit/preview", {**fields, "preview_step": step}
        )
        assert shown.status_code == 200, shown.text

    # Saved untouched: every control as it was, those the editor does not show (skip) too.
    assert (await save(author, workflow_id, fields)).status_code == 303
    assert await controls_of(api, workflow_id) == [HTTP_CONTROLS, {"custom": {"tier": "<vip>"}}]

    # New steps of both kinds, filled in by the controls' names.
    fields = editor_fields(await save(author, workflow_id, fields, "add:http_request"))
    fields = editor_fields(await save(author, workflow_id, fields, "add:custom"))
    fields.update(
        {
            "steps-2-method": "POST",
            "steps-2-url": "https://hooks.example.com/new",
            "steps-2-headers": "Content-Type: application/json",
            "steps-2-body": '{"id": "{{payload.order}}"}',
            "steps-2-continueOnFailure": "on",
            "steps-3-controls": '{"segment": "new"}',
        }
    )
    assert (await save(author, workflow_id, fields)).status_code == 303
    steps = (await stored(api, workflow_id))["steps"]
    assert [step["template"]["type"] for step in steps] == ["http_request", "custom", "http_request", "custom"]
    controls = await controls_of(api, workflow_id)
    assert controls[2] == {
        "method": "POST",
        "url": "https://hooks.example.com/new",
        "headers": [{"key": "Content-Type", "value": "application/json"}],
        "body": '{"id": "{{payload.order}}"}',
        "continueOnFailure": True,
    }
    assert controls[3] == {"segment": "new"}


async def test_http_request_and_custom_controls_that_are_wrong_are_refused_beside_their_fields(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api, steps=[])
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields = editor_fields(await save(author, workflow["_id"], fields, "add:http_request"))
    fields = editor_fields(await save(author, workflow["_id"], fields, "add:custom"))
    fields.update(
        {
            "steps-0-headers": "no colon here",
            "steps-0-responseBodySchema": "{not json",
            "steps-1-controls": "[1, 2]",
        }
    )
    refused = await save(author, workflow["_id"], fields)
    assert refused.status_code == 422
    assert 'id="steps-0-headers-error"' in refused.text and "Line 1 is not a name and a value" in refused.text
    assert 'id="steps-0-responseBodySchema-error"' in refused.text
    assert 'id="steps-1-controls-error"' in refused.text
    parser = _EditorForm()
    parser.feed(refused.text)
    again = dict(parser.fields)
    assert again["steps-0-headers"] == "no colon here" and again["steps-0-responseBodySchema"] == "{not json"

    # The text fixed, the step's own rule (a url to call) is the service's, shown beside the url.
    again.update({"steps-0-headers": "", "steps-0-responseBodySchema": "", "steps-1-controls": "{}"})
    refused = await save(author, workflow["_id"], again)
    assert refused.status_code == 422 and 'id="steps-0-url-error"' in refused.text
    assert (await stored(api, workflow["_id"]))["steps"] == []


async def test_a_condition_group_is_added_with_and_without_the_script(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    workflow = await create_workflow(api)
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields = editor_fields(await save(author, workflow["_id"], fields, "condition:0"))
    fields.update({"steps-0-filters-0-0-field": "plan", "steps-0-filters-0-0-value": "pro"})

    # Without the script: the button asks the server, which answers with a second group of one empty row.
    page = await save(author, workflow["_id"], fields, "group:0")
    fields = editor_fields(page)
    assert fields["steps-0-filters-1-0-field"] == "" and fields["steps-0-filters-1-match"] == "AND"
    assert 'value="condition:0.1"' in page.text  # the new group's own "Add condition"
    fields.update(
        {
            "steps-0-filters-1-match": "OR",
            "steps-0-filters-1-0-on": "subscriber",
            "steps-0-filters-1-0-field": "locale",
            "steps-0-filters-1-0-value": "fr",
        }
    )
    fields = editor_fields(await save(author, workflow["_id"], fields, "condition:0.1"))
    fields.update({"steps-0-filters-1-1-field": "locale", "steps-0-filters-1-1-value": "de"})
    # As the script leaves the form: a third group, numbered after the others, from the page's group template.
    fields.update(
        {
            "steps-0-filters-2-match": "AND",
            "steps-0-filters-2-0-on": "tenant",
            "steps-0-filters-2-0-field": "name",
            "steps-0-filters-2-0-operator": "NOT_EQUAL",
            "steps-0-filters-2-0-value": "acme",
        }
    )
    assert (await save(author, workflow["_id"], fields)).status_code == 303

    saved = (await stored(api, workflow["_id"]))["steps"][0]["filters"]
    row = {"operator": "EQUAL"}
    assert saved == [
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [{**row, "on": "payload", "field": "plan", "value": "pro"}],
        },
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "OR",
            "children": [
                {**row, "on": "subscriber", "field": "locale", "value": "fr"},
                {**row, "on": "payload", "field": "locale", "value": "de"},
            ],
        },
        {
            "isNegated": False,
            "type": "GROUP",
            "value": "AND",
            "children": [{"on": "tenant", "field": "name", "value": "acme", "operator": "NOT_EQUAL"}],
        },
    ]


async def test_an_email_body_switches_between_blocks_and_html_and_says_what_is_kept(
    api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    blocks = [
        {"type": "text", "content": "Hello {{payload.name}}", "styles": {"textAlign": "center"}},
        {"type": "button", "content": "Open", "url": "https://example.com/o/{{payload.name}}"},
    ]
    workflow = await create_workflow(
        api, steps=[{"name": "mail", "template": {"type": "email", "subject": "Hi", "content": blocks}}]
    )
    author = await console_as("author")
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    payload = json.dumps({"name": "Ada"})
    before = await author.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email",
        {**fields, "test_payload": payload, "preview_step": "0"},
    )

    # Blocks to HTML: the HTML the blocks are sent as, variables kept; it previews the same.
    page = await save(author, workflow["_id"], fields, "bodyas:0.html")
    assert "The body is now HTML" in page.text
    fields = editor_fields(page)
    assert "{{payload.name}}" in fields["steps-0-content"] and "steps-0-blocks-0-content" not in fields
    after = await author.post_form(
        f"/console/workflows/{workflow['_id']}/edit/preview/email",
        {**fields, "test_payload": payload, "preview_step": "0"},
    )
    assert before.status_code == after.status_code == 200
    assert "Hello Ada" in after.text and after.text == before.text
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    template = (await stored(api, workflow["_id"]))["steps"][0]["template"]
    assert isinstance(template["content"], str) and "{{payload.name}}" in template["content"]

    # HTML to blocks: one text block of the HTML's text, and the page says the markup is gone.
    fields = editor_fields(await author.get(f"/console/workflows/{workflow['_id']}/edit"))
    fields["steps-0-content"] = (
        '<p>Dear {{payload.name}},</p><p><a href="https://example.com">your order</a> shipped.</p>'
    )
    page = await save(author, workflow["_id"], fields, "bodyas:0.blocks")
    assert "its markup (styles, images, layout) is gone" in page.text
    fields = editor_fields(page)
    assert "steps-0-content" not in fields and fields["steps-0-blocks-0-type"] == "text"
    assert fields["steps-0-blocks-0-content"] == "Dear {{payload.name}},\n\nyour order (https://example.com) shipped."
    assert (await save(author, workflow["_id"], fields)).status_code == 303
    template = (await stored(api, workflow["_id"]))["steps"][0]["template"]
    assert template["content"] == [
        {"type": "text", "content": "Dear {{payload.name}},\n\nyour order (https://example.com) shipped."}
    ]
