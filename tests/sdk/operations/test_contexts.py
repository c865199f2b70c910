"""novu.contexts.*: the v2 context operations."""

from __future__ import annotations

import pytest
from novu_py import Novu, models
from novu_py.utils import RetryConfig

from tests.sdk.operations.conftest import call

# novu-py retries a 409 with backoff for up to an hour; a test of the 409 asks once.
NO_RETRIES = RetryConfig("none", None, False)


def make(
    novu: Novu, id_: str, data: dict[str, object] | None = None, retries: RetryConfig | None = None
) -> models.GetContextResponseDto:
    body: dict[str, object] = {"type": "tenant", "id": id_}
    if data is not None:
        body["data"] = data
    if retries is not None:
        return novu.contexts.create(create_context_request_dto=body, retries=retries).result  # type: ignore[arg-type]
    return novu.contexts.create(create_context_request_dto=body).result  # type: ignore[arg-type]


async def test_contexts_create(novu: Novu) -> None:
    created = await call(lambda: make(novu, "acme", {"plan": "pro"}))
    assert created.type == "tenant" and created.id == "acme" and created.data == {"plan": "pro"}
    with pytest.raises(models.ErrorDto):
        await call(lambda: make(novu, "acme", retries=NO_RETRIES))


async def test_contexts_list(novu: Novu) -> None:
    for id_ in ("alpha", "beta", "gamma"):
        await call(lambda id_=id_: make(novu, id_))
    first = await call(lambda: novu.contexts.list(request={"limit": 2, "order_direction": "ASC"}).result)
    assert [item.id for item in first.data] == ["alpha", "beta"]
    assert first.total_count == 3 and first.next is not None
    rest = await call(
        lambda: novu.contexts.list(request={"limit": 2, "order_direction": "ASC", "after": first.next}).result
    )
    assert [item.id for item in rest.data] == ["gamma"]
    searched = await call(lambda: novu.contexts.list(request={"search": "mm"}).result)
    assert [item.id for item in searched.data] == ["gamma"]


async def test_contexts_retrieve(novu: Novu) -> None:
    await call(lambda: make(novu, "acme", {"plan": "pro"}))
    fetched = await call(lambda: novu.contexts.retrieve(type_="tenant", id="acme").result)
    assert fetched.data == {"plan": "pro"}
    with pytest.raises(models.ErrorDto):
        await call(lambda: novu.contexts.retrieve(type_="tenant", id="missing"))


async def test_contexts_update(novu: Novu) -> None:
    await call(lambda: make(novu, "acme", {"plan": "pro"}))
    updated = await call(
        lambda: (
            novu.contexts.update(
                type_="tenant", id="acme", update_context_request_dto={"data": {"plan": "free"}}
            ).result
        )
    )
    assert updated.data == {"plan": "free"}
    assert (await call(lambda: novu.contexts.retrieve(type_="tenant", id="acme").result)).data == {"plan": "free"}


async def test_contexts_delete(novu: Novu) -> None:
    await call(lambda: make(novu, "acme"))
    await call(lambda: novu.contexts.delete(type_="tenant", id="acme"))
    with pytest.raises(models.ErrorDto):
        await call(lambda: novu.contexts.retrieve(type_="tenant", id="acme"))
