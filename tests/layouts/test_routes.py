"""Novu's v1 and v2 layout routes, over the same rows."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI
from novu_py import models
from sqlalchemy import select

from herald.layouts import service
from herald.models import Layout
from tests.conftest import Tenancy, assert_error
from tests.fixtures.builders import create_workflow, unique

V1_KEYS = {
    "_id",
    "_organizationId",
    "_environmentId",
    "_creatorId",
    "name",
    "identifier",
    "description",
    "channel",
    "content",
    "contentType",
    "variables",
    "isDefault",
    "isDeleted",
    "createdAt",
    "updatedAt",
}
HTML = "<html><body><header>{{subscriber.firstName}}</header>{{{body}}}<footer>Acme</footer></body></html>"


async def create_v1(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    body = {"name": "Brand", "identifier": unique("brand"), "content": HTML, **fields}
    response = await api.post("/v1/layouts", json=body)
    assert response.status_code == 201, response.text
    created = response.json()["data"]
    fetched = await api.get(f"/v1/layouts/{created['_id']}")
    assert fetched.status_code == 200, fetched.text
    return fetched.json()["data"]


async def create_v2(api: httpx.AsyncClient, layout_id: str | None = None, name: str = "Brand") -> dict[str, Any]:
    response = await api.post("/v2/layouts", json={"layoutId": layout_id or unique("layout"), "name": name})
    assert response.status_code == 201, response.text
    return response.json()["data"]


async def rows(app: FastAPI, environment_id: str) -> list[Layout]:
    async with app.state.sessionmaker() as session:
        result = await session.execute(
            select(Layout).where(Layout.environment_id == environment_id).order_by(Layout.created_at)
        )
        return list(result.scalars())


# --------------------------------------------------------------------------- v1


async def test_v1_create_get_and_first_is_default(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    first = await create_v1(api, description="Our brand", variables=[{"name": "firstName", "type": "String"}])
    assert set(first) >= V1_KEYS
    assert first["channel"] == "email" and first["content"] == HTML and first["description"] == "Our brand"
    assert first["isDefault"] is True, "an environment's first layout is its default"
    second = await create_v1(api, name="Other")
    assert second["isDefault"] is False
    by_identifier = await api.get(f"/v1/layouts/{second['identifier']}")
    assert by_identifier.json()["data"]["_id"] == second["_id"]
    stored = await rows(app, tenancy.environment_id)
    assert [(row.identifier, row.is_default, row.origin) for row in stored] == [
        (first["identifier"], True, "novu-cloud-v1"),
        (second["identifier"], False, "novu-cloud-v1"),
    ]


async def test_v1_create_refuses_content_without_body_and_a_taken_identifier(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/layouts", json={"name": "x", "identifier": "x", "content": "<p>no body</p>"})
    body = assert_error(response, 422)
    assert "content" in body["errors"]
    broken = await api.post("/v1/layouts", json={"name": "x", "identifier": "x", "content": "{{{body}}} {% if %}"})
    assert_error(broken, 422)
    layout = await create_v1(api)
    again = await api.post("/v1/layouts", json={"name": "x", "identifier": layout["identifier"], "content": HTML})
    assert_error(again, 409)
    missing = await api.post("/v1/layouts", json={"name": "x", "content": HTML})
    assert_error(missing, 422)


async def test_v1_list_pages(api: httpx.AsyncClient) -> None:
    made = [await create_v1(api, name=f"L{n}") for n in range(3)]
    page = await api.get("/v1/layouts", params={"page": 0, "pageSize": 2, "sortBy": "name", "orderBy": 1})
    assert page.status_code == 200, page.text
    body = page.json()
    assert body["totalCount"] == 3 and body["pageSize"] == 2 and body["page"] == 0
    assert [item["name"] for item in body["data"]] == ["L0", "L1"]
    rest = (await api.get("/v1/layouts", params={"page": 1, "pageSize": 2, "sortBy": "name", "orderBy": 1})).json()
    assert [item["_id"] for item in rest["data"]] == [made[2]["_id"]]


async def test_v1_update_patch_and_default(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    first = await create_v1(api)
    second = await create_v1(api)
    response = await api.patch(
        f"/v1/layouts/{second['_id']}", json={"name": "Renamed", "content": "<div>{{{body}}}</div>"}
    )
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert (
        data["name"] == "Renamed"
        and data["content"] == "<div>{{{body}}}</div>"
        and data["identifier"] == second["identifier"]
    )
    assert_error(await api.patch(f"/v1/layouts/{second['_id']}", json={"content": "<div></div>"}), 422)

    made_default = await api.post(f"/v1/layouts/{second['identifier']}/default")
    assert made_default.status_code == 204, made_default.text
    stored = {row.id: row.is_default for row in await rows(app, tenancy.environment_id)}
    assert stored == {first["_id"]: False, second["_id"]: True}
    patched = await api.patch(f"/v1/layouts/{first['_id']}", json={"isDefault": True})
    assert patched.json()["data"]["isDefault"] is True
    stored = {row.id: row.is_default for row in await rows(app, tenancy.environment_id)}
    assert stored == {first["_id"]: True, second["_id"]: False}


async def test_v1_delete_refuses_the_default_and_a_layout_in_use(
    api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    default = await create_v1(api)
    used = await create_v1(api)
    spare = await create_v1(api)
    await create_workflow(
        api,
        steps=[
            {
                "name": "mail",
                "template": {"type": "email", "subject": "s", "content": "c", "layoutId": used["identifier"]},
            }
        ],
    )
    assert_error(await api.delete(f"/v1/layouts/{default['_id']}"), 409)
    assert_error(await api.delete(f"/v1/layouts/{used['_id']}"), 409)
    deleted = await api.delete(f"/v1/layouts/{spare['_id']}")
    assert deleted.status_code == 204
    assert_error(await api.get(f"/v1/layouts/{spare['_id']}"), 404)
    assert {row.id for row in await rows(app, tenancy.environment_id)} == {default["_id"], used["_id"]}


async def test_layouts_are_scoped_to_the_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, other_org_api: httpx.AsyncClient
) -> None:
    layout = await create_v1(api)
    for client in (production_api, other_org_api):
        assert_error(await client.get(f"/v1/layouts/{layout['_id']}"), 404)
        assert_error(await client.get(f"/v2/layouts/{layout['identifier']}"), 404)
        assert_error(await client.delete(f"/v2/layouts/{layout['_id']}"), 404)
        assert (await client.get("/v2/layouts")).json()["data"]["totalCount"] == 0
    # The same key in another environment is another layout.
    other = await production_api.post(
        "/v1/layouts", json={"name": "x", "identifier": layout["identifier"], "content": HTML}
    )
    assert other.status_code == 201, other.text


# --------------------------------------------------------------------------- v2


async def test_v2_create_answers_the_sdk_shape(api: httpx.AsyncClient) -> None:
    layout = await create_v2(api, "brand", "Brand")
    parsed = models.LayoutResponseDto.model_validate(layout)
    assert parsed.layout_id == "brand" and parsed.name == "Brand" and parsed.is_default is True
    assert parsed.controls.values.email is not None and "{{content}}" in parsed.controls.values.email.body
    assert_error(await api.post("/v2/layouts", json={"layoutId": "brand", "name": "Again"}), 409)
    assert_error(await api.post("/v2/layouts", json={"layoutId": "bad key!", "name": "x"}), 422)


async def test_v2_and_v1_share_rows(api: httpx.AsyncClient) -> None:
    v1 = await create_v1(api)
    fetched = await api.get(f"/v2/layouts/{v1['identifier']}")
    assert fetched.status_code == 200
    dto = models.LayoutResponseDto.model_validate(fetched.json()["data"])
    assert dto.id == v1["_id"] and dto.origin == "novu-cloud-v1" and dto.controls.values.email.body == HTML
    v2 = await create_v2(api)
    assert (await api.get(f"/v1/layouts/{v2['_id']}")).json()["data"]["identifier"] == v2["layoutId"]


async def test_v2_list_filters_orders_and_pages(api: httpx.AsyncClient) -> None:
    await create_v2(api, "alpha-news", "Alpha")
    await create_v2(api, "beta", "Beta news")
    await create_v2(api, "gamma", "Gamma")
    response = await api.get("/v2/layouts", params={"query": "NEWS", "orderBy": "name", "orderDirection": "ASC"})
    assert response.status_code == 200, response.text
    listed = models.ListLayoutResponseDto.model_validate(response.json()["data"])
    assert listed.total_count == 2 and [item.layout_id for item in listed.layouts] == ["alpha-news", "beta"]
    page = models.ListLayoutResponseDto.model_validate(
        (
            await api.get("/v2/layouts", params={"limit": 1, "offset": 1, "orderBy": "name", "orderDirection": "DESC"})
        ).json()["data"]
    )
    assert page.total_count == 3 and [item.name for item in page.layouts] == ["Beta news"]
    assert_error(await api.get("/v2/layouts", params={"orderBy": "nope"}), 422)


async def test_v2_update_replaces_the_body(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    layout = await create_v2(api, "brand")
    body = "<section>{{content}}</section>"
    response = await api.put(
        "/v2/layouts/brand",
        json={
            "name": "New",
            "isTranslationEnabled": True,
            "controlValues": {"email": {"body": body, "editorType": "html"}},
        },
    )
    assert response.status_code == 200, response.text
    dto = models.LayoutResponseDto.model_validate(response.json()["data"])
    assert dto.name == "New" and dto.is_translation_enabled is True and dto.controls.values.email.body == body
    [row] = await rows(app, tenancy.environment_id)
    assert (row.id, row.content, row.name) == (layout["_id"], body, "New")
    no_placeholder = await api.put(
        "/v2/layouts/brand", json={"name": "x", "controlValues": {"email": {"body": "<p/>", "editorType": "html"}}}
    )
    assert_error(no_placeholder, 422)
    block = await api.put(
        "/v2/layouts/brand", json={"name": "x", "controlValues": {"email": {"body": "{}", "editorType": "block"}}}
    )
    assert_error(block, 422)
    assert_error(await api.put("/v2/layouts/missing", json={"name": "x"}), 404)


async def test_v2_delete_even_in_use(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    await create_v2(api, "brand")
    response = await api.delete("/v2/layouts/brand")
    assert response.status_code == 204
    assert await rows(app, tenancy.environment_id) == []
    assert_error(await api.delete("/v2/layouts/brand"), 404)


async def test_v2_duplicate(api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy) -> None:
    await create_v2(api, "brand")
    await api.put(
        "/v2/layouts/brand",
        json={"name": "Brand", "controlValues": {"email": {"body": "<i>{{content}}</i>", "editorType": "html"}}},
    )
    response = await api.post("/v2/layouts/brand/duplicate", json={"name": "Brand copy"})
    assert response.status_code == 201, response.text
    copy = models.LayoutResponseDto.model_validate(response.json()["data"])
    assert (
        copy.layout_id == "brand-copy"
        and copy.is_default is False
        and copy.controls.values.email.body == "<i>{{content}}</i>"
    )
    named = await api.post("/v2/layouts/brand/duplicate", json={"name": "Brand copy", "layoutId": "third"})
    assert named.json()["data"]["layoutId"] == "third"
    again = await api.post("/v2/layouts/brand/duplicate", json={"name": "Brand copy"})
    assert again.status_code == 201 and again.json()["data"]["layoutId"].startswith("brand-copy-")
    assert len(await rows(app, tenancy.environment_id)) == 4


async def test_v2_preview_renders_the_layout(api: httpx.AsyncClient) -> None:
    await create_v2(api, "brand")
    await api.put(
        "/v2/layouts/brand",
        json={
            "name": "Brand",
            "controlValues": {"email": {"body": "<p>Hi {{subscriber.firstName}}</p>{{content}}", "editorType": "html"}},
        },
    )
    response = await api.post(
        "/v2/layouts/brand/preview", json={"previewPayload": {"subscriber": {"firstName": "Grace"}}}
    )
    assert response.status_code == 201, response.text
    dto = models.GenerateLayoutPreviewResponseDto.model_validate(response.json()["data"])
    assert (
        dto.result.preview.body.startswith("<p>Hi Grace</p>") and "data-content-placeholder" in dto.result.preview.body
    )
    override = await api.post(
        "/v2/layouts/brand/preview",
        json={"controlValues": {"email": {"body": "<b>{{content}}</b>", "editorType": "html"}}},
    )
    assert override.json()["data"]["result"]["preview"]["body"].startswith("<b><div data-content-placeholder")


async def test_v2_usage_lists_workflows_naming_the_layout(api: httpx.AsyncClient) -> None:
    layout = await create_v2(api, "brand")
    by_key = await create_workflow(
        api,
        name="Uses key",
        steps=[{"name": "m", "template": {"type": "email", "subject": "s", "content": "c", "layoutId": "brand"}}],
    )
    await create_workflow(
        api,
        name="Uses id",
        steps=[{"name": "m", "template": {"type": "email", "subject": "s", "content": "c", "layoutId": layout["_id"]}}],
    )
    await create_workflow(
        api, name="None", steps=[{"name": "m", "template": {"type": "email", "subject": "s", "content": "c"}}]
    )
    response = await api.get("/v2/layouts/brand/usage")
    assert response.status_code == 200, response.text
    usage = models.GetLayoutUsageResponseDto.model_validate(response.json()["data"])
    assert [(w.name, w.workflow_id) for w in usage.workflows] == [
        ("Uses key", by_key["triggers"][0]["identifier"]),
        ("Uses id", usage.workflows[1].workflow_id),
    ]


# --------------------------------------------------------------------------- promotion


async def test_copy_layout_into_another_environment(
    api: httpx.AsyncClient, production_api: httpx.AsyncClient, app: FastAPI, tenancy: Tenancy
) -> None:
    source = await create_v1(api, identifier="brand", description="d")
    await create_v1(api, identifier="other")
    existing = await production_api.post(
        "/v1/layouts", json={"name": "Old", "identifier": "brand", "content": "<s>{{{body}}}</s>"}
    )
    assert existing.status_code == 201
    async with app.state.sessionmaker() as session:
        layouts = await service.layouts_by_key(session, tenancy.environment_id)
        assert set(layouts) == {"brand", "other"}
        updated = await service.copy_layout(
            session, layouts["brand"], tenancy.production_environment_id, tenancy.organization_id
        )
        made = await service.copy_layout(
            session, layouts["other"], tenancy.production_environment_id, tenancy.organization_id
        )
        await session.commit()
    assert updated.created is False and updated.layout.id == existing.json()["data"]["_id"]
    assert made.created is True
    production = {row.identifier: row for row in await rows(app, tenancy.production_environment_id)}
    assert production["brand"].content == source["content"] and production["brand"].description == "d"
    assert production["brand"].is_default is True and production["other"].is_default is False
    assert production["other"].content == HTML
