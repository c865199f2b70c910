"""Steps of a workflow with translations on render {{t.key}} in the subscriber's locale, else the default locale."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from herald.engine.templates import TemplateError
from herald.engine.worker import Worker
from herald.translations.render import lookup, translate_template, translate_text
from tests.conftest import Tenancy
from tests.engine.conftest import messages_of, set_aside_other_jobs, statements_while, trigger
from tests.engine.test_delivery import name_of, settle
from tests.fixtures.builders import create_subscriber, create_workflow
from tests.translations.helpers import translated_workflow

# The first in-app step is settled inside its trigger's expansion, the second runs as a step job:
# both paths translate.
STEPS = [
    {"name": "first", "template": {"type": "in_app", "content": "{{t.welcome.title}} | {{t.welcome.body}}"}},
    {
        "name": "second",
        "template": {"type": "in_app", "content": "{{ t.footer }} | {{t.only.default}} | {{t.nowhere.at_all}}"},
    },
]
ENGLISH = {
    "welcome": {"title": "Welcome", "body": "Hello {{payload.name}}"},
    "footer": "Thanks",
    "only.default": "Default only",
}
FRENCH = {"welcome.title": "Bienvenue", "welcome": {"body": "Bonjour {{payload.name}}"}, "footer": "Merci"}


async def _translate(api: httpx.AsyncClient, identifier: str, locale: str, content: dict[str, Any]) -> None:
    body = {"resourceId": identifier, "resourceType": "workflow", "locale": locale, "content": content}
    response = await api.post("/v2/translations", json=body)
    assert response.status_code == 200, response.text


async def _contents(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker, workflow: dict[str, Any], **subscriber: Any
) -> list[str]:
    recipient = await create_subscriber(api, **subscriber)
    result = await trigger(api, name_of(workflow), recipient["subscriberId"], payload={"name": "Ada <3"})
    jobs = await settle(worker, app, result["transactionId"])
    assert {job.status for job in jobs} == {"completed"}, [(j.step_type, j.status) for j in jobs]
    messages = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])
    return [message.content for message in sorted(messages, key=lambda m: m.created_at)]


async def test_a_french_subscriber_gets_the_french_text(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    await _translate(api, name_of(workflow), "en_US", ENGLISH)
    await _translate(api, name_of(workflow), "fr_FR", FRENCH)
    first, second = await _contents(api, app, tenancy, worker, workflow, locale="fr_FR")
    # Flat dotted keys and nested ones both answer; the translation's own variables are rendered (and escaped).
    assert first == "Bienvenue | Bonjour Ada &lt;3"
    # A key French lacks comes from the default locale; a key no locale has renders as its path.
    assert second == "Merci | Default only | nowhere.at_all"


async def test_an_unknown_or_missing_locale_gets_the_default_locale(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    await _translate(api, name_of(workflow), "en_US", ENGLISH)
    await _translate(api, name_of(workflow), "fr_FR", FRENCH)
    expected = ["Welcome | Hello Ada &lt;3", "Thanks | Default only | nowhere.at_all"]
    assert await _contents(api, app, tenancy, worker, workflow, locale="ja_JP") == expected
    assert await _contents(api, app, tenancy, worker, workflow) == expected
    # fr_CA is not fr_FR: Novu's locales are language_REGION and are matched exactly.
    assert await _contents(api, app, tenancy, worker, workflow, locale="fr_CA") == expected


async def test_the_organizations_default_locale_is_the_fallback(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)
    await _translate(api, name_of(workflow), "en_US", ENGLISH)
    await _translate(api, name_of(workflow), "fr_FR", FRENCH)
    # The organization's locales reach Production too: its own key sets them.
    response = await production_api.patch("/v1/organizations/settings", json={"defaultLocale": "fr_FR"})
    assert response.status_code == 200, response.text
    first, second = await _contents(api, app, tenancy, worker, workflow, locale="de_DE")
    assert first == "Bienvenue | Bonjour Ada &lt;3"
    assert second == "Merci | only.default | nowhere.at_all"  # en_US is no fallback any more


async def test_a_workflow_without_translations_reads_none(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    workflow = await create_workflow(api, steps=STEPS)
    await _translate(api, name_of(workflow), "en_US", ENGLISH)
    recipient = await create_subscriber(api, locale="en_US")

    async def run() -> list[Any]:
        result = await trigger(api, name_of(workflow), recipient["subscriberId"], payload={"name": "Ada"})
        await settle(worker, app, result["transactionId"])
        return await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"])

    def reads_translations(statement: str) -> bool:
        return "from translation" in statement.lower()

    await set_aside_other_jobs(app, tenancy.environment_id)
    assert await statements_while(app, run(), reads_translations) == []
    # The same capture sees the read once the workflow has translations on.
    translated = await translated_workflow(app, api, tenancy.environment_id, steps=STEPS)

    async def run_translated() -> None:
        result = await trigger(api, name_of(translated), recipient["subscriberId"], payload={"name": "Ada"})
        await settle(worker, app, result["transactionId"])

    assert await statements_while(app, run_translated(), reads_translations) != []
    messages = await messages_of(app, tenancy.environment_id, template_identifier=name_of(workflow))
    # Translations off: {{t.key}} is payload.t.key as before (bare names are payload keys): nothing here.
    assert sorted(m.content for m in messages) == [" | ", " |  | "]


def test_lookup_reads_nested_flat_and_mixed_keys() -> None:
    keys = {"a": {"b": "nested", "c": {"d": 4}}, "a.x": "flat", "e": True, "f": {"g": "obj"}}
    assert lookup(keys, "a.b") == "nested"
    assert lookup(keys, "a.x") == "flat"
    assert lookup(keys, "a.c.d") == "4"
    assert lookup(keys, "e") == "true"
    assert lookup(keys, "f") is None  # an object is not text
    assert lookup(keys, "missing.key") is None
    text = "{{t.a.b}} {{ t.a.x }} {{t.nope}} {{payload.t.a.b}} {{ subscriber.firstName }}"
    assert translate_text(text, [keys]) == "nested flat nope {{payload.t.a.b}} {{ subscriber.firstName }}"
    assert translate_text("{{t.a.b}}", [{"a.b": "first"}, keys]) == "first"


def test_translated_text_is_counted_while_it_is_made() -> None:
    keys = {"k": "x" * 45_000}
    assert translate_text("{{t.k}}{{t.k}}", [keys]) == "x" * 90_000
    for template in ("{{t.k}}" * 3, "{{t.k}}{{t.k}}" + "y" * 10_001):
        with pytest.raises(TemplateError, match=r"with its translations has more than 100,000 characters") as caught:
            translate_text(template, [keys])
        assert caught.value.limit
    # A step's strings share the count: two blocks of 90,000 characters each are past it together.
    blocks = [{"type": "text", "content": "{{t.k}}{{t.k}}"}] * 2
    with pytest.raises(TemplateError, match="render limit"):
        translate_template({"content": blocks}, [keys])


async def test_a_translation_renders_within_the_render_limits(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    # A translation is template source: one past a limit fails its step for good, and the limit is named.
    loops = "{% for i in (1..6000) %}{% endfor %}{% for i in (1..6000) %}{% endfor %}"
    steps = [
        {"name": "bomb", "template": {"type": "in_app", "content": "{{t.bomb}}"}},
        {"name": "after", "template": {"type": "in_app", "content": "{{t.after}}"}},
    ]
    workflow = await translated_workflow(app, api, tenancy.environment_id, steps=steps)
    await _translate(api, name_of(workflow), "en_US", {"bomb": loops, "after": "still delivered"})
    recipient = await create_subscriber(api)
    result = await trigger(api, name_of(workflow), recipient["subscriberId"], payload={})
    bomb, after = await settle(worker, app, result["transactionId"])
    assert (bomb.status, bomb.attempts) == ("failed", 1)
    assert "loop iteration limit of 10,000 reached (render limit)" in (bomb.error_text or "")
    assert after.status == "completed"
    [inbox] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="in_app")
    assert inbox.content == "still delivered"


async def test_a_translation_bomb_is_refused_before_it_is_made_and_stores_nothing(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy, worker: Worker
) -> None:
    # 2,002 references to a 45,000-character text made a 90 MB message: tagless text skipped the source limit.
    steps = [
        {"name": "bomb", "template": {"type": "in_app", "content": "{{t.k}}" * 2002}},
        {"name": "long", "template": {"type": "in_app", "content": "{{t.k}}{{t.k}}{{t.k}}"}},
        {"name": "after", "template": {"type": "in_app", "content": "{{t.k}}{{t.k}}"}},
    ]
    # Stored unchecked: the API now refuses the bomb's 14,000 characters of tags on save.
    workflow = await translated_workflow(app, api, tenancy.environment_id, unchecked=True, steps=steps)
    await _translate(api, name_of(workflow), "en_US", {"k": "x" * 45_000})
    recipient = await create_subscriber(api)
    result = await trigger(api, name_of(workflow), recipient["subscriberId"], payload={})
    bomb, long, after = await settle(worker, app, result["transactionId"])
    limit = "the step's template with its translations has more than 100,000 characters (render limit)"
    for job in (bomb, long):  # 90 MB, and 135,000 characters: both past the source limit
        assert (job.status, job.attempts) == ("failed", 1), (job.status, job.error_text)
        assert limit in (job.error_text or "")
    assert after.status == "completed"
    [inbox] = await messages_of(app, tenancy.environment_id, transaction_id=result["transactionId"], channel="in_app")
    assert inbox.content == "x" * 90_000
