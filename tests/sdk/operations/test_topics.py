"""novu.topics.*: the v2 topic and subscription operations (and the v1 membership check)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from novu_py import Novu, models
from novu_py.utils import RetryConfig

from tests.conftest import Tenancy
from tests.sdk.operations.conftest import call
from tests.sdk.operations.runs import run_worker

# novu-py retries a 409 with backoff for up to an hour; a test of the 409 asks once.
NO_RETRIES = RetryConfig("none", None, False)


def subscriber(novu: Novu, subscriber_id: str) -> None:
    novu.subscribers.create(create_subscriber_request_dto={"subscriber_id": subscriber_id})


async def test_topics_create(novu: Novu) -> None:
    created = await call(lambda: novu.topics.create(create_update_topic_request_dto={"key": "news", "name": "News"}))
    assert created.result.key == "news" and created.result.name == "News"
    again = await call(
        lambda: novu.topics.create(create_update_topic_request_dto={"key": "news", "name": "Daily news"}).result
    )
    assert again.id == created.result.id and again.name == "Daily news"
    with pytest.raises(models.TopicResponseDtoError) as refused:
        await call(
            lambda: novu.topics.create(
                create_update_topic_request_dto={"key": "news"}, fail_if_exists=True, retries=NO_RETRIES
            )
        )
    assert refused.value.data.id == created.result.id and refused.value.data.name == "Daily news"


async def test_topics_list(novu: Novu) -> None:
    for key in ("t0", "t1", "t2"):
        await call(lambda key=key: novu.topics.create(create_update_topic_request_dto={"key": key}))
    first = await call(lambda: novu.topics.list(request={"limit": 2, "order_direction": "ASC"}).result)
    assert [topic.key for topic in first.data] == ["t0", "t1"]
    assert first.total_count == 3 and first.next is not None and first.previous is None
    rest = await call(
        lambda: novu.topics.list(request={"limit": 2, "order_direction": "ASC", "after": first.next}).result
    )
    assert [topic.key for topic in rest.data] == ["t2"] and rest.next is None
    named = await call(lambda: novu.topics.list(request={"key": "t1"}).result)
    assert [topic.key for topic in named.data] == ["t1"]


async def test_topics_get(novu: Novu) -> None:
    await call(lambda: novu.topics.create(create_update_topic_request_dto={"key": "ops", "name": "Ops"}))
    topic = await call(lambda: novu.topics.get(topic_key="ops").result)
    assert topic.key == "ops" and topic.name == "Ops" and topic.created_at
    with pytest.raises(models.ErrorDto):
        await call(lambda: novu.topics.get(topic_key="missing"))


async def test_topics_update(novu: Novu) -> None:
    await call(lambda: novu.topics.create(create_update_topic_request_dto={"key": "ops", "name": "Ops"}))
    updated = await call(
        lambda: novu.topics.update(topic_key="ops", update_topic_request_dto={"name": "Operations"}).result
    )
    assert updated.name == "Operations"
    assert (await call(lambda: novu.topics.get(topic_key="ops").result)).name == "Operations"


async def test_topics_delete(novu: Novu) -> None:
    await call(lambda: subscriber(novu, "ada"))
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="ops", create_topic_subscriptions_request_dto={"subscriptions": ["ada"]}
        )
    )
    deleted = await call(lambda: novu.topics.delete(topic_key="ops").result)
    assert deleted.acknowledged is True
    with pytest.raises(models.ErrorDto):
        await call(lambda: novu.topics.get(topic_key="ops"))


async def test_topics_subscriptions_create(novu: Novu) -> None:
    await call(lambda: subscriber(novu, "ada"))
    await call(lambda: subscriber(novu, "bob"))
    created = await call(
        lambda: (
            novu.topics.subscriptions.create(
                topic_key="launches",
                create_topic_subscriptions_request_dto={
                    "name": "Launches",
                    "subscriptions": ["ada", {"subscriber_id": "bob", "identifier": "bob-launches"}, "ghost"],
                    "preferences": [{"workflow_id": "launch-note", "enabled": False}],
                    "context": {"tenant": "acme"},
                },
            ).result
        )
    )
    assert created.meta.successful == 2 and created.meta.failed == 1
    assert created.errors is not None and created.errors[0].subscriber_id == "ghost"
    identifiers = {item.subscriber.subscriber_id: item.identifier for item in created.data if item.subscriber}
    assert identifiers == {"ada": "tk_launches:si_ada", "bob": "bob-launches"}
    assert created.data[0].context_keys == ["tenant:acme"]
    assert created.data[0].preferences is not None and created.data[0].preferences[0].enabled is False
    topic = await call(lambda: novu.topics.get(topic_key="launches").result)
    assert topic.name == "Launches"


async def test_topics_subscriptions_create_with_a_condition_the_engine_applies(
    novu: Novu, app: FastAPI, tenancy: Tenancy
) -> None:
    """A subscription's condition (JSONLogic on the payload) decides whether a trigger to the topic reaches it."""
    for name in ("ada", "bob"):
        await call(lambda name=name: subscriber(novu, name))
    await call(
        lambda: novu.workflows.create(
            create_workflow_dto={
                "name": "Alert",
                "workflow_id": "alert",
                "active": True,
                "steps": [{"name": "Inbox", "type": "in_app", "control_values": {"body": "Alert {{payload.level}}"}}],
            }
        )
    )
    condition = {"==": [{"var": "payload.level"}, "high"]}
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="alerts",
            create_topic_subscriptions_request_dto={
                "subscriptions": ["ada"],
                "preferences": [{"workflow_id": "alert", "condition": condition}],
            },
        )
    )
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="alerts", create_topic_subscriptions_request_dto={"subscriptions": ["bob"]}
        )
    )
    transactions = {}
    for level in ("low", "high"):
        answer = await call(
            lambda level=level: (
                novu.trigger(
                    trigger_event_request_dto={
                        "workflow_id": "alert",
                        "to": {"type": "Topic", "topic_key": "alerts"},
                        "payload": {"level": level},
                    }
                ).result
            )
        )
        transactions[level] = answer.transaction_id
    await run_worker(app)
    internal = {}
    for name in ("ada", "bob"):
        internal[await call(lambda name=name: novu.subscribers.retrieve(subscriber_id=name).result.id)] = name
    reached = {}
    for level, transaction_id in transactions.items():
        listed = await call(
            lambda transaction_id=transaction_id: (
                novu.messages.retrieve(request={"transaction_id": [transaction_id]}).result
            )
        )
        reached[level] = sorted(internal[message.subscriber_id] for message in listed.data)
    assert reached == {"low": ["bob"], "high": ["ada", "bob"]}


async def test_topics_subscriptions_list(novu: Novu) -> None:
    for name in ("ada", "bob", "cy"):
        await call(lambda name=name: subscriber(novu, name))
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="team", create_topic_subscriptions_request_dto={"subscriptions": ["ada", "bob", "cy"]}
        )
    )
    first = await call(
        lambda: (
            novu.topics.subscriptions.list(request={"topic_key": "team", "limit": 2, "order_direction": "ASC"}).result
        )
    )
    assert [item.subscriber.subscriber_id for item in first.data] == ["ada", "bob"]
    assert first.total_count == 3 and first.next is not None
    rest = await call(
        lambda: (
            novu.topics.subscriptions.list(
                request={"topic_key": "team", "limit": 2, "order_direction": "ASC", "after": first.next}
            ).result
        )
    )
    assert [item.subscriber.subscriber_id for item in rest.data] == ["cy"]
    assert rest.data[0].topic.key == "team"


async def test_topics_subscriptions_get_subscription(novu: Novu) -> None:
    await call(lambda: subscriber(novu, "ada"))
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="team",
            create_topic_subscriptions_request_dto={
                "subscriptions": [{"subscriber_id": "ada", "identifier": "ada-team", "name": "Ada"}]
            },
        )
    )
    details = await call(
        lambda: novu.topics.subscriptions.get_subscription(topic_key="team", identifier="ada-team").result
    )
    assert details.identifier == "ada-team" and details.name == "Ada"


async def test_topics_subscriptions_update(novu: Novu) -> None:
    await call(lambda: subscriber(novu, "ada"))
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="team", create_topic_subscriptions_request_dto={"subscriptions": ["ada"]}
        )
    )
    updated = await call(
        lambda: (
            novu.topics.subscriptions.update(
                topic_key="team",
                identifier="tk_team:si_ada",
                update_topic_subscription_request_dto={
                    "name": "Ada's",
                    "preferences": [{"workflow_id": "w", "enabled": False, "condition": {"==": [1, 1]}}],
                },
            ).result
        )
    )
    assert updated.name == "Ada's"
    assert updated.preferences is not None and updated.preferences[0].condition == {"==": [1, 1]}
    details = await call(
        lambda: novu.topics.subscriptions.get_subscription(topic_key="team", identifier="tk_team:si_ada").result
    )
    assert details.name == "Ada's"


async def test_topics_subscriptions_delete(novu: Novu) -> None:
    await call(lambda: subscriber(novu, "ada"))
    await call(lambda: subscriber(novu, "bob"))
    await call(
        lambda: novu.topics.subscriptions.create(
            topic_key="team", create_topic_subscriptions_request_dto={"subscriptions": ["ada", "bob"]}
        )
    )
    removed = await call(
        lambda: (
            novu.topics.subscriptions.delete(
                topic_key="team", delete_topic_subscriptions_request_dto={"subscriptions": ["ada", "ghost"]}
            ).result
        )
    )
    assert [item.identifier for item in removed.data] == ["tk_team:si_ada"]
    assert removed.meta.failed == 1
    left = await call(lambda: novu.topics.subscriptions.list(request={"topic_key": "team"}).result)
    assert [item.subscriber.subscriber_id for item in left.data] == ["bob"]
