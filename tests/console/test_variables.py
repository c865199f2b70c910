"""The Variables page, in process: values of this environment, a secret's never, and the workflows that read each."""

from __future__ import annotations

import httpx

from tests.conftest import Tenancy
from tests.fixtures.builders import create_workflow, unique
from tests.fixtures.console import ConsoleAs

SECRET = "sk_live_0123456789abcdefghijklmnop"


async def test_values_shown_secrets_never_and_where_each_is_used(
    tenancy: Tenancy, api: httpx.AsyncClient, console_as: ConsoleAs
) -> None:
    base, token = unique("BASE").replace("-", "_"), unique("TOKEN").replace("-", "_")
    for key, value, secret in ((base, "https://acme.example", False), (token, SECRET, True)):
        body = {"key": key, "isSecret": secret, "values": [{"_environmentId": tenancy.environment_id, "value": value}]}
        assert (await api.post("/v1/environment-variables", json=body)).status_code == 200
    steps = [{"name": "inbox", "template": {"type": "in_app", "content": "See {{ env." + base + " }}/orders"}}]
    workflow = await create_workflow(api, steps=steps)
    viewer = await console_as("viewer")
    page = await viewer.get("/console/variables")
    assert page.status_code == 200, page.text
    assert base in page.text and "https://acme.example" in page.text and token in page.text
    # Neither the secret nor any part of it reaches the browser.
    assert SECRET not in page.text and SECRET[:3] + "*" not in page.text and SECRET[-4:] not in page.text
    row = page.text[page.text.index(f"<code>{base}</code>") :].split("</tr>", 1)[0]
    assert workflow["name"] in row
    unused = page.text[page.text.index(f"<code>{token}</code>") :].split("</tr>", 1)[0]
    assert "Set" in unused and "No workflow" in unused
    found = await viewer.get("/console/variables", params={"search": token})
    assert token in found.text and base not in found.text
