"""novu.subscribers.*: the v2 subscriber operations."""

from __future__ import annotations

from novu_py import Novu

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
