"""novu.layouts.*: the v2 layout operations."""

from __future__ import annotations

import httpx
import pytest
from novu_py import Novu, models
from novu_py.models import ErrorDto

from tests.conftest import Tenancy
from tests.sdk.operations.conftest import call

BODY = "<html><body><h1>{{subscriber.firstName}}</h1>{{content}}</body></html>"


def make(novu: Novu, layout_id: str, name: str = "Brand") -> models.LayoutResponseDto:
    return novu.layouts.create(create_layout_dto={"layout_id": layout_id, "name": name}).result


async def test_layouts_create(novu: Novu) -> None:
    created = await call(lambda: make(novu, "brand"))
    assert created.layout_id == "brand" and created.name == "Brand" and created.is_default is True
    assert created.controls.values.email is not None and "{{content}}" in created.controls.values.email.body
    fetched = await call(lambda: novu.layouts.retrieve(layout_id=created.id).result)
    assert fetched.layout_id == "brand"


async def test_layouts_list(novu: Novu) -> None:
    for layout_id, name in (("alpha", "Alpha news"), ("beta", "Beta"), ("gamma", "Gamma news")):
        await call(lambda layout_id=layout_id, name=name: make(novu, layout_id, name))
    listed = await call(
        lambda: (
            novu.layouts.list(
                request={"query": "news", "order_by": "name", "order_direction": "ASC", "limit": 1}
            ).result
        )
    )
    assert listed.total_count == 2 and [layout.layout_id for layout in listed.layouts] == ["alpha"]
    rest = await call(
        lambda: (
            novu.layouts.list(
                request={"query": "news", "order_by": "name", "order_direction": "ASC", "offset": 1}
            ).result
        )
    )
    assert [layout.layout_id for layout in rest.layouts] == ["gamma"]


async def test_layouts_retrieve(novu: Novu) -> None:
    created = await call(lambda: make(novu, "brand"))
    by_key = await call(lambda: novu.layouts.retrieve(layout_id="brand").result)
    by_id = await call(lambda: novu.layouts.retrieve(layout_id=created.id).result)
    assert by_key.id == by_id.id == created.id
    with pytest.raises(ErrorDto) as missing:
        await call(lambda: novu.layouts.retrieve(layout_id="missing"))
    assert missing.value.status_code == 404


async def test_layouts_update(novu: Novu) -> None:
    await call(lambda: make(novu, "brand"))
    updated = await call(
        lambda: (
            novu.layouts.update(
                layout_id="brand",
                update_layout_dto={
                    "name": "Renamed",
                    "control_values": {"email": {"body": BODY, "editor_type": "html"}},
                },
            ).result
        )
    )
    assert updated.name == "Renamed" and updated.controls.values.email.body == BODY
    fetched = await call(lambda: novu.layouts.retrieve(layout_id="brand").result)
    assert fetched.name == "Renamed" and fetched.controls.values.email.body == BODY


async def test_layouts_delete(novu: Novu) -> None:
    await call(lambda: make(novu, "brand"))
    await call(lambda: novu.layouts.delete(layout_id="brand"))
    with pytest.raises(ErrorDto) as gone:
        await call(lambda: novu.layouts.retrieve(layout_id="brand"))
    assert gone.value.status_code == 404
    assert (await call(lambda: novu.layouts.list().result)).total_count == 0


async def test_layouts_duplicate(novu: Novu) -> None:
    await call(lambda: make(novu, "brand"))
    await call(
        lambda: novu.layouts.update(
            layout_id="brand",
            update_layout_dto={"name": "Brand", "control_values": {"email": {"body": BODY, "editor_type": "html"}}},
        )
    )
    copy = await call(
        lambda: (
            novu.layouts.duplicate(
                layout_id="brand", duplicate_layout_dto={"name": "Brand copy", "layout_id": "brand-2"}
            ).result
        )
    )
    assert copy.layout_id == "brand-2" and copy.name == "Brand copy" and copy.is_default is False
    assert copy.controls.values.email.body == BODY
    assert (await call(lambda: novu.layouts.list().result)).total_count == 2


async def test_layouts_generate_preview(novu: Novu) -> None:
    await call(lambda: make(novu, "brand"))
    await call(
        lambda: novu.layouts.update(
            layout_id="brand",
            update_layout_dto={"name": "Brand", "control_values": {"email": {"body": BODY, "editor_type": "html"}}},
        )
    )
    preview = await call(
        lambda: (
            novu.layouts.generate_preview(
                layout_id="brand",
                layout_preview_request_dto={"preview_payload": {"subscriber": {"first_name": "Grace"}}},
            ).result
        )
    )
    assert preview.result.preview is not None
    assert preview.result.preview.body.startswith("<html><body><h1>Grace</h1>")
    assert "Dynamic placeholder content" in preview.result.preview.body


async def test_layouts_usage(novu: Novu, server_url: str, tenancy: Tenancy) -> None:
    await call(lambda: make(novu, "brand"))
    workflow = {
        "name": "Receipts",
        "active": True,
        "steps": [{"name": "mail", "template": {"type": "email", "subject": "s", "content": "c", "layoutId": "brand"}}],
    }
    async with httpx.AsyncClient(base_url=server_url, headers={"Authorization": f"ApiKey {tenancy.api_key}"}) as client:
        response = await client.post("/v1/workflows", json=workflow)
        assert response.status_code == 201, response.text
        identifier = response.json()["data"]["triggers"][0]["identifier"]
    usage = await call(lambda: novu.layouts.usage(layout_id="brand").result)
    assert [(w.name, w.workflow_id) for w in usage.workflows] == [("Receipts", identifier)]
