from __future__ import annotations

from typing import Any

import pytest

from herald.kit.errors import ValidationFailed
from herald.workflows.schemas import StepRequest
from herald.workflows.service import (
    TemplateVariables,
    build_steps,
    derive_trigger_identifier,
    variables_in_text,
    workflow_variables,
)


@pytest.mark.parametrize(
    ("text", "payload", "subscriber"),
    [
        ("Hello {{payload.name}} {{ payload.order.id }}", ["name", "order.id"], []),
        # Novu v1 templates name payload keys bare.
        ("Hi {{name}}, {{firstName}}", ["name", "firstName"], []),
        ("{{subscriber.firstName}} {{subscriber.data.plan}}", [], ["firstName", "data.plan"]),
        # System namespaces are filled by the renderer.
        ("{{actor.firstName}} {{step.total_count}} {{branding.logo}} {{tenant.name}}", [], []),
        ("{{payload}} {{subscriber}}", [], []),
        ("{{{payload.html}}} {{&payload.raw}} {{~payload.trimmed~}}", ["html", "raw", "trimmed"], []),
        ("{{name}} {{payload.name}} {{name}}", ["name"], []),
        # Helpers: arguments are variables, helper names and literals are not.
        ('{{uppercase payload.name}} {{dateFormat payload.at "LL"}} {{pluralize count 2}}', ["name", "at", "count"], []),
        ("{{dateFormat (lowercase payload.when) format=payload.fmt}}", ["when", "fmt"], []),
        # Blocks that change the context: names inside refer to the item.
        ("{{#each payload.items}}{{title}} {{this.x}} {{@index}} {{../name}}{{/each}} {{after}}", ["items", "after"], []),
        ("{{#each payload.rows as |row|}}{{row.id}}{{/each}}", ["rows"], []),
        ("{{#with payload.user}}{{email}}{{/with}}", ["user"], []),
        ("{{#payload.section}}{{inner}}{{/payload.section}}{{outer}}", ["section", "outer"], []),
        # Blocks that keep it: names inside are still payload.
        ("{{#if payload.show}}{{shown}}{{else if payload.other}}{{else}}{{hidden}}{{/if}}", ["show", "shown", "other", "hidden"], []),
        ("{{#unless flag}}x{{/unless}}", ["flag"], []),
        # Comments, partials and plain text.
        ("{{!-- {{secret}} --}} {{! note }} {{> footer}} no braces", [], []),
        # Liquid filters, as v2 templates write them.
        ("{{ payload.name | upcase }} {{ subscriber.email | default: 'x' }}", ["name"], ["email"]),
        ("{{true}} {{else}} {{ }}", [], []),
        # Liquid tags: loop variables, assigned and captured names are the template's own.
        ("{% for e in step.events %}{{e.author}}: {{e.text}} {{forloop.index}}{% endfor %}", [], []),
        ("{% for item in payload.items limit: 3 reversed %}{{ item.name | upcase }} {{title}}{% endfor %}{{item}}", ["items", "title", "item"], []),
        ("{%- for n in (1..payload.count) -%}{{n}}{%- endfor -%}", ["count"], []),
        ("{% assign total = payload.total | plus: 1 %}{{total}} {% capture greeting %}Hi{% endcapture %}{{greeting}}", ["total"], []),
        ("{% if payload.vip and subscriber.data.tier == 'gold' %}{{perk}}{% elsif other %}{% endif %}", ["vip", "perk", "other"], ["data.tier"]),
        ("{% comment %}{{secret}}{% endcomment %}{% raw %}{{literal}}{% endraw %}{{shown}}", ["shown"], []),
    ],
)
def test_variables_in_text(text: str, payload: list[str], subscriber: list[str]) -> None:
    assert variables_in_text(text) == TemplateVariables(payload, subscriber)


def test_workflow_variables_read_every_text_variant_and_step_key() -> None:
    steps: list[dict[str, Any]] = [
        {
            "template": {
                "type": "email",
                "subject": "{{payload.subject}}",
                "preheader": "{{payload.pre}}",
                "senderName": "{{payload.sender}}",
                "content": [
                    {"type": "text", "content": "Hi {{subscriber.firstName}}"},
                    {"type": "button", "content": "{{payload.label}}", "url": "https://x/{{payload.slug}}"},
                ],
                "variables": [{"name": "declared"}, {"name": "payload.prefixed"}],
            },
            "variants": [{"template": {"type": "email", "content": "{{payload.variant}}"}}],
        },
        {
            "template": {
                "type": "in_app",
                "content": "x",
                "title": "{{payload.title}}",
                "cta": {
                    "data": {"url": "/{{payload.url}}"},
                    "action": {"buttons": [{"type": "primary", "content": "{{payload.button}}", "resultContent": "{{payload.done}}"}]},
                },
            }
        },
        {"template": {"type": "digest"}, "metadata": {"type": "regular", "digestKey": "payload.groupId"}},
        {"template": {"type": "delay"}, "metadata": {"type": "scheduled", "delayPath": "sendAt"}},
    ]
    variables = workflow_variables(steps)
    assert variables.payload == [
        "subject",
        "label",
        "slug",
        "pre",
        "sender",
        "declared",
        "prefixed",
        "variant",
        "title",
        "url",
        "button",
        "done",
        "groupId",
        "sendAt",
    ]
    assert variables.subscriber == ["firstName"]


def test_workflow_variables_of_no_steps() -> None:
    assert workflow_variables([]) == TemplateVariables([], [])


def _steps(*raw: dict[str, Any]) -> list[StepRequest]:
    return [StepRequest.model_validate(item) for item in raw]


def test_build_steps_gives_ids_and_chains_parents() -> None:
    first, second = build_steps(
        _steps({"template": {"type": "in_app", "content": "a"}}, {"name": "mail", "template": {"type": "email"}})
    )
    assert first["_id"] != second["_id"] and first["uuid"] != second["uuid"]
    assert "_parentId" not in first and second["_parentId"] == first["_id"]
    assert first["name"] == "in_app" and second["name"] == "mail"
    assert first["active"] is True and first["shouldStopOnFail"] is False


def test_build_steps_keeps_ids_of_steps_sent_back() -> None:
    existing = build_steps(_steps({"template": {"type": "in_app"}, "variants": [{"template": {"type": "in_app"}}]}))
    old = existing[0]
    again = build_steps(
        _steps({"_id": old["_id"], "template": {"type": "in_app"}, "variants": [{"_id": old["variants"][0]["_id"], "template": {"type": "in_app"}}]}),
        existing=existing,
    )
    assert (again[0]["uuid"], again[0]["_templateId"]) == (old["uuid"], old["_templateId"])
    assert again[0]["variants"][0]["_templateId"] == old["variants"][0]["_templateId"]
    # Without the id it is a new step.
    fresh = build_steps(_steps({"template": {"type": "in_app"}}), existing=existing)
    assert fresh[0]["_id"] != old["_id"] and fresh[0]["_templateId"] != old["_templateId"]


def test_build_steps_reports_every_error_with_its_path() -> None:
    with pytest.raises(ValidationFailed) as raised:
        build_steps(
            _steps(
                {"template": {"type": "digest"}, "metadata": {"type": "backoff", "amount": 1, "unit": "days"}},
                {"template": {"type": "delay"}},
            )
        )
    errors = raised.value.extra["errors"]
    assert set(errors) == {"steps.0.metadata.backoffAmount", "steps.0.metadata.backoffUnit", "steps.1.metadata"}


@pytest.mark.parametrize(
    ("name", "identifier"),
    [("Welcome Email!", "welcome-email"), ("  Ünïcódé  names ", "unicode-names"), ("a" * 400, "a" * 300)],
)
def test_derive_trigger_identifier(name: str, identifier: str) -> None:
    assert derive_trigger_identifier(name) == identifier


def test_derive_trigger_identifier_needs_something_to_slugify() -> None:
    with pytest.raises(ValidationFailed) as raised:
        derive_trigger_identifier("📣 !!!")
    assert "triggerIdentifier" in raised.value.extra["errors"]
