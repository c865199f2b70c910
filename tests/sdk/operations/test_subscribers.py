"""novu.subscribers.*: the v2 subscriber operations."""

from __future__ import annotations

from novu_py import Novu

from tests.fixtures.builders import unique
from tests.sdk.operations.conftest import call


async def test_subscribers_create(novu: Novu) -> None:
    created = await call(
        lambda: novu.subscribers.create(
            create_subscriber_request_dto={"subscriber_id": "ada", "first_name": "Ada", "email": "ada@example.com"}
        ).result
    )
    assert created.subscriber_id == "ada"
    fetched = await call(lambda: novu.subscribers.retrieve(subscriber_id="ada").result)
    assert fetched.first_name == "Ada" and fetched.email == "ada@example.com"


async def test_subscribers_search(novu: Novu) -> None:
    tag = unique("search")
    for name in ("ada", "grace", "edsger"):
        await call(
            lambda name=name: novu.subscribers.create(
                create_subscriber_request_dto={"subscriber_id": f"{tag}-{name}", "email": f"{name}@{tag}.example"}
            ).result
        )
    first = await call(lambda: novu.subscribers.search(request={"subscriber_id": tag, "limit": 2}).result)
    assert [item.subscriber_id for item in first.data] == [f"{tag}-edsger", f"{tag}-grace"]
    assert first.total_count == 3 and first.total_count_capped is False and first.previous is None and first.next
    rest = await call(lambda: novu.subscribers.search(request={"subscriber_id": tag, "limit": 2, "after": first.next}).result)
    assert [item.subscriber_id for item in rest.data] == [f"{tag}-ada"] and rest.next is None and rest.previous
    by_email = await call(lambda: novu.subscribers.search(request={"email": f"grace@{tag}"}).result)
    assert [item.subscriber_id for item in by_email.data] == [f"{tag}-grace"]
    oldest = await call(
        lambda: novu.subscribers.search(request={"subscriber_id": tag, "order_direction": "ASC", "limit": 1}).result
    )
    assert [item.subscriber_id for item in oldest.data] == [f"{tag}-ada"]
