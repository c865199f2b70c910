from __future__ import annotations

import httpx
import pytest

from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_integration


def own(items: list[dict]) -> list[dict]:
    """The integrations a test made: without the in-app (novu) integration every environment is made with."""
    return [item for item in items if item["providerId"] != "novu"]

NEW_KEY = "new-key-0123456789-0123-0new"
SPEC_REQUIRED = {
    "_environmentId",
    "_organizationId",
    "name",
    "identifier",
    "providerId",
    "channel",
    "credentials",
    "active",
    "deleted",
    "primary",
}


async def test_create_integration_defaults_and_shape(api: httpx.AsyncClient, tenancy: Tenancy) -> None:
    integration = await create_integration(api, name="My SendGrid")
    assert SPEC_REQUIRED <= integration.keys()
    assert integration["_environmentId"] == tenancy.environment_id
    assert integration["_organizationId"] == tenancy.organization_id
    assert integration["active"] is False
    assert integration["primary"] is False
    assert integration["deleted"] is False
    assert integration["identifier"].startswith("my-sendgrid-")
    # A secret this short is masked whole (herald.kit.crypto).
    assert integration["credentials"] == {"apiKey": "****"}
    assert "deletedAt" not in integration


async def test_credentials_secrets_are_encrypted_at_rest(api: httpx.AsyncClient, app) -> None:
    from sqlalchemy import select

    from herald.models import Integration

    created = await create_integration(api, credentials={"apiKey": "SG.secret", "from": "a@b.co", "secure": True})
    assert created["credentials"] == {"apiKey": "****", "from": "a@b.co", "secure": True}
    async with app.state.sessionmaker() as session:
        stored = (await session.execute(select(Integration).where(Integration.id == created["_id"]))).scalar_one()
    assert stored.credentials["apiKey"] != "SG.secret"
    assert stored.credentials["apiKey"].startswith("hsk1.")
    assert stored.credentials["from"] == "a@b.co"


async def test_first_active_email_integration_becomes_primary(api: httpx.AsyncClient) -> None:
    first = await create_integration(api, active=True)
    second = await create_integration(api, active=True, providerId="mailgun")
    assert first["primary"] is True
    assert second["primary"] is False
    chat = await create_integration(api, active=True, channel="chat", providerId="slack")
    assert chat["primary"] is False


async def test_identifier_is_unique_per_environment(api: httpx.AsyncClient, production_api: httpx.AsyncClient) -> None:
    await create_integration(api, identifier="mail")
    response = await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "email", "identifier": "mail"})
    assert_error(response, 409, "Integration with identifier already exists")
    # Another environment may use it.
    await create_integration(production_api, identifier="mail")


async def test_create_validates_channel(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "fax"})
    body = assert_error(response, 422, "Validation Error")
    assert "channel" in body["errors"]
    assert body["errors"]["channel"]["value"] == "fax"


async def test_set_primary_makes_it_the_only_primary(api: httpx.AsyncClient) -> None:
    first = await create_integration(api, active=True)
    second = await create_integration(api, providerId="mailgun", conditions=[{"children": []}])
    response = await api.post(f"/v1/integrations/{second['_id']}/set-primary")
    assert response.status_code == 201, response.text
    promoted = response.json()["data"]
    assert promoted["primary"] is True
    assert promoted["active"] is True
    assert promoted["conditions"] == []
    assert SPEC_REQUIRED <= promoted.keys()
    listed = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert listed[first["_id"]]["primary"] is False
    assert listed[first["_id"]]["active"] is True
    assert listed[second["_id"]]["priority"] > listed[first["_id"]]["priority"]
    primaries = [i for i in listed.values() if i["channel"] == "email" and i["primary"]]
    assert [p["_id"] for p in primaries] == [second["_id"]]


async def test_set_primary_works_on_every_channel_and_keeps_other_channels(api: httpx.AsyncClient) -> None:
    email = await create_integration(api, active=True)
    slack = await create_integration(api, channel="chat", providerId="slack")
    response = await api.post(f"/v1/integrations/{slack['_id']}/set-primary")
    assert response.status_code == 201
    assert response.json()["data"]["primary"] is True
    listed = {item["_id"]: item for item in (await api.get("/v1/integrations")).json()["data"]}
    assert listed[email["_id"]]["primary"] is True


async def test_set_primary_twice_is_stable(api: httpx.AsyncClient) -> None:
    integration = await create_integration(api, active=True)
    again = await api.post(f"/v1/integrations/{integration['_id']}/set-primary")
    assert again.status_code == 201
    assert again.json()["data"]["primary"] is True


async def test_set_primary_unknown_or_foreign_id_is_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    response = await api.post("/v1/integrations/000000000000000000000000/set-primary")
    assert_error(response, 404, "Integration with id 000000000000000000000000 not found")
    integration = await create_integration(api)
    for client in (production_api, other_org_api):
        response = await client.post(f"/v1/integrations/{integration['_id']}/set-primary")
        assert_error(response, 404, f"Integration with id {integration['_id']} not found")


async def test_list_active_spans_the_organization(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    dev_active = await create_integration(api, active=True)
    await create_integration(api, active=False, providerId="mailgun")
    prod_active = await create_integration(production_api, active=True, channel="sms", providerId="twilio")
    foreign = await create_integration(other_org_api, active=True)
    response = await api.get("/v1/integrations/active")
    assert response.status_code == 200
    ids = [item["_id"] for item in own(response.json()["data"])]
    assert ids == [dev_active["_id"], prod_active["_id"]]
    assert foreign["_id"] not in ids
    for item in response.json()["data"]:
        assert SPEC_REQUIRED <= item.keys()
        assert item["active"] is True


async def test_update_integration(api: httpx.AsyncClient) -> None:
    integration = await create_integration(api)
    response = await api.put(
        f"/v1/integrations/{integration['_id']}", json={"name": "Renamed", "credentials": {"apiKey": "new"}}
    )
    assert response.status_code == 200, response.text
    updated = response.json()["data"]
    assert updated["name"] == "Renamed"
    assert updated["credentials"] == {"apiKey": "****"}
    assert_error(await api.put(f"/v1/integrations/{integration['_id']}", json={}), 400, "No properties found for update")
    assert_error(await api.put("/v1/integrations/000000000000000000000000", json={"name": "x"}), 404)


async def test_deactivating_the_primary_clears_it(api: httpx.AsyncClient) -> None:
    integration = await create_integration(api, active=True)
    response = await api.put(f"/v1/integrations/{integration['_id']}", json={"active": False})
    data = response.json()["data"]
    assert data["active"] is False
    assert data["primary"] is False


async def test_delete_is_soft_and_hides_the_integration(api: httpx.AsyncClient, tenancy: Tenancy, app) -> None:
    from sqlalchemy import select

    from herald.models import Integration

    keep = await create_integration(api)
    gone = await create_integration(api, active=True, providerId="mailgun")
    response = await api.delete(f"/v1/integrations/{gone['_id']}")
    assert response.status_code == 200
    assert [item["_id"] for item in own(response.json()["data"])] == [keep["_id"]]
    listed = (await api.get("/v1/integrations")).json()["data"]
    assert gone["_id"] not in [item["_id"] for item in listed]
    async with app.state.sessionmaker() as session:
        row = (await session.execute(select(Integration).where(Integration.id == gone["_id"]))).scalar_one()
    assert row.deleted is True and row.deleted_at is not None and row.deleted_by
    assert_error(await api.delete(f"/v1/integrations/{gone['_id']}"), 404)
    # The identifier is free again.
    await create_integration(api, identifier=gone["identifier"])


@pytest.mark.parametrize("path", ["/v1/integrations", "/v1/integrations/active"])
async def test_integration_routes_require_auth(anonymous: httpx.AsyncClient, path: str) -> None:
    assert_error(await anonymous.get(path), 401, "Missing authorization header")


async def test_set_primary_answers_200_to_novus_generated_sdks(api: httpx.AsyncClient) -> None:
    """Novu's SDKs are generated from a document that promises 200 and refuse 201."""
    integration = await create_integration(api)
    response = await api.post(
        f"/v1/integrations/{integration['_id']}/set-primary",
        headers={"user-agent": "speakeasy-sdk/python 3.19.0 2.926.8 3.18.1 novu-py"},
    )
    assert response.status_code == 200
    assert response.json()["data"]["primary"] is True
    plain = await api.post(f"/v1/integrations/{integration['_id']}/set-primary")
    assert plain.status_code == 201


async def test_concurrent_set_primary_calls_leave_one_primary(api: httpx.AsyncClient) -> None:
    """Inactive integrations of a channel with no active one: nothing to lock but the channel itself."""
    import asyncio

    integrations = [await create_integration(api, channel="chat", providerId="slack") for _ in range(5)]
    responses = await asyncio.gather(
        *(api.post(f"/v1/integrations/{item['_id']}/set-primary") for item in integrations)
    )
    assert [response.status_code for response in responses] == [201] * 5, [r.text for r in responses]
    listed = (await api.get("/v1/integrations")).json()["data"]
    assert sum(1 for item in listed if item["channel"] == "chat" and item["primary"]) == 1


async def test_update_and_delete_of_foreign_ids_are_404(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    integration = await create_integration(api)
    message = f"Integration with id {integration['_id']} not found"
    for client in (production_api, other_org_api):
        assert_error(await client.put(f"/v1/integrations/{integration['_id']}", json={"name": "x"}), 404, message)
        assert_error(await client.delete(f"/v1/integrations/{integration['_id']}"), 404, message)
    # Untouched by either.
    [listed] = [item for item in (await api.get("/v1/integrations")).json()["data"] if item["_id"] == integration["_id"]]
    assert listed["name"] == integration["name"] and listed["deleted"] is False


async def test_secrets_stored_under_another_secret_key_are_a_clear_500(
    api: httpx.AsyncClient, app, tenancy: Tenancy, caplog: pytest.LogCaptureFixture
) -> None:
    from dataclasses import replace

    from herald.app import create_app
    from tests.conftest import make_client

    readable = await create_integration(api, active=True)
    sealed = await create_integration(api, providerId="mailgun", credentials={"apiKey": "key-1", "domain": "mg.example.com"})
    # The same store, served with another HERALD_SECRET_KEY.
    rekeyed = create_app(replace(app.state.settings, secret_key="another-secret-key"))
    try:
        async with make_client(rekeyed, tenancy.api_key) as client:
            response = await client.get("/v1/integrations")
            body = assert_error(response, 500)
            assert "HERALD_SECRET_KEY differs from the key they were stored with" in body["message"]
            assert readable["_id"] in body["message"] and sealed["_id"] in body["message"]
            assert body["errorId"] in caplog.text
            assert_error(await client.get("/v1/integrations/active"), 500)
            # Sending an integration's credentials again makes it readable under the new key.
            for item in (readable, sealed):
                fixed = await client.put(f"/v1/integrations/{item['_id']}", json={"credentials": {"apiKey": NEW_KEY}})
                assert fixed.status_code == 200, fixed.text
            listed = await client.get("/v1/integrations")
            assert listed.status_code == 200
            assert {item["credentials"]["apiKey"] for item in own(listed.json()["data"])} == {"new****0new"}
    finally:
        await rekeyed.state.engine.dispose()


SENDGRID_KEY = "SG.prod-secret-0123456789abcdef-ab12"
SLACK_HOOK = "https://hooks.slack.com/services/T000/B000/prodSecretPath1234"


async def test_secrets_never_leave_their_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    """The organization-wide lists show another environment's integrations with every secret masked whole."""
    email = await create_integration(
        production_api,
        active=True,
        credentials={"apiKey": SENDGRID_KEY, "from": "ops@example.com", "senderName": "Ops", "region": "eu"},
    )
    chat = await create_integration(
        production_api, active=True, channel="chat", providerId="slack", credentials={"webhookUrl": SLACK_HOOK}
    )
    for path in ("/v1/integrations", "/v1/integrations/active"):
        response = await api.get(path)
        assert response.status_code == 200, response.text
        assert "prod-secret" not in response.text and "prodSecretPath" not in response.text
        listed = {item["_id"]: item for item in response.json()["data"]}
        assert listed[email["_id"]]["credentials"] == {
            "apiKey": "****", "from": "ops@example.com", "senderName": "Ops", "region": "eu"
        }
        assert listed[chat["_id"]]["credentials"] == {"webhookUrl": "****"}
    # Its own environment sees the masked edges, never the secret.
    own = {item["_id"]: item for item in (await production_api.get("/v1/integrations")).json()["data"]}
    assert own[email["_id"]]["credentials"]["apiKey"] == "SG.****ab12"
    assert own[chat["_id"]]["credentials"]["webhookUrl"] == "htt****1234"


async def test_every_answer_masks_secrets(api: httpx.AsyncClient) -> None:
    """Create, list, active, update, set-primary and delete's list: no answer carries a secret."""
    credentials = {"apiKey": SENDGRID_KEY, "from": "a@example.com", "host": "smtp.example.com", "port": "2525"}
    created_response = await api.post(
        "/v1/integrations", json={"providerId": "sendgrid", "channel": "email", "credentials": credentials}
    )
    created = created_response.json()["data"]
    other = await create_integration(api, providerId="mailgun", credentials={"apiKey": "key-short", "domain": "mg.example.com"})
    answers = [
        created_response,
        await api.get("/v1/integrations"),
        await api.put(f"/v1/integrations/{created['_id']}", json={"active": True}),
        await api.get("/v1/integrations/active"),
        await api.post(f"/v1/integrations/{created['_id']}/set-primary"),
        await api.delete(f"/v1/integrations/{other['_id']}"),
    ]
    for response in answers:
        assert response.status_code in (200, 201), response.text
        assert "prod-secret" not in response.text and "key-short" not in response.text
        data = response.json()["data"]
        for item in data if isinstance(data, list) else [data]:
            if item["_id"] == created["_id"]:
                assert item["credentials"] == {**credentials, "apiKey": "SG.****ab12"}


async def test_update_with_the_mask_keeps_the_secret(api: httpx.AsyncClient, app) -> None:
    from sqlalchemy import select

    from herald.models import Integration

    async def stored(integration_id: str) -> dict:
        async with app.state.sessionmaker() as session:
            row = (await session.execute(select(Integration).where(Integration.id == integration_id))).scalar_one()
        return app.state.secret_box.open_credentials(row.credentials)

    created = await create_integration(
        api, providerId="ses", credentials={"apiKey": "AKIA-short", "secretKey": SENDGRID_KEY, "region": "eu-west-1"}
    )
    shown = created["credentials"]
    assert shown == {"apiKey": "****", "secretKey": "SG.****ab12", "region": "eu-west-1"}
    # Sending back what was shown (a form that edits one field) keeps both secrets.
    echoed = await api.put(f"/v1/integrations/{created['_id']}", json={"credentials": {**shown, "region": "us-east-1"}})
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["data"]["credentials"] == {**shown, "region": "us-east-1"}
    assert await stored(created["_id"]) == {"apiKey": "AKIA-short", "secretKey": SENDGRID_KEY, "region": "us-east-1"}
    # A new value replaces the secret.
    replaced = await api.put(f"/v1/integrations/{created['_id']}", json={"credentials": {**shown, "secretKey": NEW_KEY}})
    assert replaced.json()["data"]["credentials"]["secretKey"] == "new****0new"
    assert (await stored(created["_id"]))["secretKey"] == NEW_KEY
    assert (await stored(created["_id"]))["apiKey"] == "AKIA-short"


async def test_webhook_url_is_a_secret_of_the_integration(api: httpx.AsyncClient, app) -> None:
    from sqlalchemy import select

    from herald.models import Integration

    created = await create_integration(
        api, channel="chat", providerId="discord", credentials={"webhookUrl": SLACK_HOOK}
    )
    assert created["credentials"] == {"webhookUrl": "htt****1234"}
    async with app.state.sessionmaker() as session:
        row = (await session.execute(select(Integration).where(Integration.id == created["_id"]))).scalar_one()
    assert row.credentials["webhookUrl"].startswith("hsk1.")
    assert app.state.secret_box.open(row.credentials["webhookUrl"]) == SLACK_HOOK


@pytest.mark.parametrize("active", [False, True])
async def test_unknown_provider_is_refused_with_the_channels_providers(api: httpx.AsyncClient, active: bool) -> None:
    response = await api.post(
        "/v1/integrations", json={"providerId": "sendgird", "channel": "email", "active": active, "credentials": {"apiKey": "k"}}
    )
    body = assert_error(response, 422, "Validation Error")
    [message] = body["errors"]["providerId"]["messages"]
    assert body["errors"]["providerId"]["value"] == "sendgird"
    assert message.startswith("Unknown provider sendgird for channel email; supported: ")
    supported = message.split("supported: ")[1].split(", ")
    assert {"sendgrid", "nodemailer", "mailgun", "ses", "sendinblue", "brevo"} <= set(supported)
    assert "twilio" not in supported


async def test_provider_of_another_channel_is_refused(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/integrations", json={"providerId": "twilio", "channel": "email"})
    body = assert_error(response, 422, "Validation Error")
    assert body["errors"]["channel"] == {"messages": ["Provider twilio sends sms, not email: use channel sms"], "value": "email"}


async def test_in_app_takes_novus_in_app_provider_without_credentials(api: httpx.AsyncClient) -> None:
    inbox = await create_integration(api, providerId="novu", channel="in_app", active=True, credentials={})
    assert (inbox["providerId"], inbox["channel"], inbox["active"]) == ("novu", "in_app", True)
    body = assert_error(await api.post("/v1/integrations", json={"providerId": "sendgrid", "channel": "in_app"}), 422)
    assert body["errors"]["providerId"]["messages"] == ["Unknown provider sendgrid for channel in_app; supported: novu"]


async def test_brand_names_are_accepted_for_their_novu_ids(api: httpx.AsyncClient) -> None:
    brevo = await create_integration(api, providerId="brevo", active=True, credentials={"apiKey": "xkeysib-1"})
    assert brevo["providerId"] == "brevo"


async def test_an_active_integration_needs_its_providers_credentials(api: httpx.AsyncClient) -> None:
    """Refused while active (create, update, set-primary); an inactive draft may be incomplete."""
    incomplete = {"providerId": "mailgun", "channel": "email", "credentials": {"apiKey": "key-1", "domain": "  "}}
    body = assert_error(await api.post("/v1/integrations", json={**incomplete, "active": True}), 422, "Validation Error")
    assert list(body["errors"]) == ["credentials.domain"]
    [message] = body["errors"]["credentials.domain"]["messages"]
    assert "mailgun cannot send without credentials.domain" in message and "required: apiKey, domain" in message

    draft = await create_integration(api, **incomplete)
    assert draft["active"] is False
    path = f"/v1/integrations/{draft['_id']}"
    assert "credentials.domain" in assert_error(await api.put(path, json={"active": True}), 422)["errors"]
    assert "credentials.domain" in assert_error(await api.post(f"{path}/set-primary"), 422)["errors"]
    # Dropping a required secret from an active integration is refused too; the mask of one keeps it.
    fixed = await api.put(path, json={"active": True, "credentials": {**draft["credentials"], "domain": "mg.example.com"}})
    assert fixed.status_code == 200, fixed.text
    assert fixed.json()["data"]["active"] is True
    dropped = await api.put(path, json={"credentials": {"domain": "mg.example.com"}})
    assert "credentials.apiKey" in assert_error(dropped, 422)["errors"]
    assert (await api.put(path, json={"active": False, "credentials": {"domain": "mg.example.com"}})).status_code == 200


SIGNING_KEY = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


async def test_the_webhook_signing_key_is_sealed_at_rest_and_shown_masked(api: httpx.AsyncClient, app) -> None:
    """configurations.inboundWebhookSigningKey checks the provider's webhooks: a secret like the credentials'."""
    from sqlalchemy import select

    from herald.models import Integration

    configurations = {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": SIGNING_KEY}
    created_response = await api.post(
        "/v1/integrations",
        json={"providerId": "resend", "channel": "email", "credentials": {"apiKey": "re_123"}, "configurations": configurations},
    )
    created = created_response.json()["data"]
    other = await create_integration(
        api, providerId="mailgun", configurations={"inboundWebhookSigningKey": "key-short"}
    )
    async with app.state.sessionmaker() as session:
        row = (await session.execute(select(Integration).where(Integration.id == created["_id"]))).scalar_one()
    assert row.configurations["inboundWebhookSigningKey"].startswith("hsk1.")
    assert app.state.secret_box.open(row.configurations["inboundWebhookSigningKey"]) == SIGNING_KEY
    assert row.configurations["inboundWebhookEnabled"] is True

    answers = [
        created_response,
        await api.get("/v1/integrations"),
        await api.put(f"/v1/integrations/{created['_id']}", json={"active": True}),
        await api.get("/v1/integrations/active"),
        await api.post(f"/v1/integrations/{created['_id']}/set-primary"),
        await api.delete(f"/v1/integrations/{other['_id']}"),
    ]
    for response in answers:
        assert response.status_code in (200, 201), response.text
        assert "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" not in response.text and "key-short" not in response.text
        data = response.json()["data"]
        for item in data if isinstance(data, list) else [data]:
            if item["_id"] == created["_id"]:
                assert item["configurations"] == {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": "whs****LaSw"}


async def test_the_webhook_signing_key_never_leaves_its_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient
) -> None:
    """The organization-wide lists show another environment's signing key as ``****`` whole."""
    production = await create_integration(
        production_api,
        active=True,
        providerId="mailgun",
        credentials={"apiKey": "key-1", "domain": "mg.example.com"},
        configurations={"inboundWebhookEnabled": True, "inboundWebhookSigningKey": SIGNING_KEY},
    )
    for path in ("/v1/integrations", "/v1/integrations/active"):
        response = await api.get(path)
        assert response.status_code == 200, response.text
        assert "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" not in response.text
        listed = {item["_id"]: item for item in response.json()["data"]}
        assert listed[production["_id"]]["configurations"] == {
            "inboundWebhookEnabled": True, "inboundWebhookSigningKey": "****"
        }
    own = {item["_id"]: item for item in (await production_api.get("/v1/integrations")).json()["data"]}
    assert own[production["_id"]]["configurations"]["inboundWebhookSigningKey"] == "whs****LaSw"


async def test_update_with_the_masked_signing_key_keeps_it(api: httpx.AsyncClient, app) -> None:
    from sqlalchemy import select

    from herald.models import Integration

    async def stored(integration_id: str) -> dict:
        async with app.state.sessionmaker() as session:
            row = (await session.execute(select(Integration).where(Integration.id == integration_id))).scalar_one()
        return app.state.secret_box.open_configurations(row.configurations)

    created = await create_integration(
        api, providerId="resend", configurations={"inboundWebhookEnabled": False, "inboundWebhookSigningKey": SIGNING_KEY}
    )
    shown = created["configurations"]
    assert shown == {"inboundWebhookEnabled": False, "inboundWebhookSigningKey": "whs****LaSw"}
    # A form that switches inbound webhooks on sends back what it was shown.
    echoed = await api.put(
        f"/v1/integrations/{created['_id']}", json={"configurations": {**shown, "inboundWebhookEnabled": True}}
    )
    assert echoed.status_code == 200, echoed.text
    assert echoed.json()["data"]["configurations"] == {**shown, "inboundWebhookEnabled": True}
    assert await stored(created["_id"]) == {"inboundWebhookEnabled": True, "inboundWebhookSigningKey": SIGNING_KEY}
    # A new value replaces it.
    replaced = await api.put(
        f"/v1/integrations/{created['_id']}", json={"configurations": {**shown, "inboundWebhookSigningKey": NEW_KEY}}
    )
    assert replaced.json()["data"]["configurations"]["inboundWebhookSigningKey"] == "new****0new"
    assert (await stored(created["_id"]))["inboundWebhookSigningKey"] == NEW_KEY

