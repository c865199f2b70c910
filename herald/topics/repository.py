from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.cursor import CursorPage, CursorParams, cursor_page
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Subscriber, Topic, TopicSubscriber, Workflow

# Rows per multi-row INSERT and values per IN (...) list: far below SQLite's
# and asyncpg's bound-parameter limits.
INSERT_CHUNK = 500
LOOKUP_CHUNK = 1000
MEMBER_BATCH = 1000


TOPIC_ORDER = {"createdAt": Topic.created_at, "updatedAt": Topic.updated_at, "_id": Topic.id}
SUBSCRIPTION_ORDER = {
    "createdAt": TopicSubscriber.created_at,
    "updatedAt": TopicSubscriber.updated_at,
    "_id": TopicSubscriber.id,
}


def default_identifier(topic_key: str, subscriber_id: str) -> str:
    """The identifier a subscription gets when the caller names none (as Novu makes it)."""
    return f"tk_{topic_key}:si_{subscriber_id}"


class TopicRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def keys_that_exist(self, environment_id: str, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        result = await self.session.execute(
            select(Topic.key).where(Topic.environment_id == environment_id, Topic.key.in_(list(keys)))
        )
        return set(result.scalars())

    async def get_by_key(self, environment_id: str, key: str) -> Topic | None:
        result = await self.session.execute(
            select(Topic).where(Topic.environment_id == environment_id, Topic.key == key)
        )
        return result.scalar_one_or_none()

    async def insert(self, topic: Topic) -> bool:
        """Insert a new topic; False when its key was taken meanwhile (a concurrent create)."""
        try:
            async with self.session.begin_nested():
                self.session.add(topic)
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def list_page(
        self, environment_id: str, *, offset: int, limit: int, key: str | None = None, name: str | None = None
    ) -> tuple[Sequence[Topic], int]:
        """A page of topics, oldest first, and how many match in all."""
        conditions = [Topic.environment_id == environment_id]
        if key is not None:
            conditions.append(Topic.key == key)
        if name is not None:
            conditions.append(Topic.name == name)
        total = (await self.session.execute(select(func.count()).select_from(Topic).where(*conditions))).scalar_one()
        result = await self.session.execute(
            select(Topic).where(*conditions).order_by(Topic.created_at, Topic.id).offset(offset).limit(limit)
        )
        return result.scalars().all(), int(total)

    async def delete(self, topic: Topic) -> None:
        await self.session.delete(topic)
        await self.session.flush()

    async def has_members(self, topic: Topic) -> bool:
        result = await self.session.execute(
            select(TopicSubscriber.id).where(TopicSubscriber.topic_id == topic.id).limit(1)
        )
        return result.first() is not None

    async def member_subscriber_ids(self, topic: Topic) -> list[str]:
        """Every member's subscriberId (the caller's identifier), in the order they joined."""
        result = await self.session.execute(
            select(TopicSubscriber.external_subscriber_id)
            .where(TopicSubscriber.topic_id == topic.id)
            .order_by(TopicSubscriber.id)
        )
        return list(result.scalars())

    async def first_member_subscriber_ids(self, topics: Sequence[Topic], limit: int) -> dict[str, list[str]]:
        """Up to ``limit`` member subscriberIds of each topic, in the order they joined."""
        members: dict[str, list[str]] = {topic.id: [] for topic in topics}
        if not topics:
            return members
        position = (
            func.row_number()
            .over(partition_by=TopicSubscriber.topic_id, order_by=TopicSubscriber.id)
            .label("position")
        )
        ranked = (
            select(TopicSubscriber.topic_id, TopicSubscriber.external_subscriber_id, position)
            .where(TopicSubscriber.topic_id.in_(list(members)))
            .subquery()
        )
        result = await self.session.execute(
            select(ranked.c.topic_id, ranked.c.external_subscriber_id)
            .where(ranked.c.position <= limit)
            .order_by(ranked.c.topic_id, ranked.c.position)
        )
        for topic_id, subscriber_id in result:
            members[topic_id].append(subscriber_id)
        return members

    async def add_members(self, topic: Topic, subscribers: Sequence[Subscriber]) -> None:
        """Make the subscribers members; ones that already are stay as they are."""
        now = utcnow()
        rows: list[dict[str, Any]] = [
            {
                "id": new_id(),
                "topic_id": topic.id,
                "environment_id": topic.environment_id,
                "organization_id": topic.organization_id,
                "subscriber_id": subscriber.id,
                "external_subscriber_id": subscriber.subscriber_id,
                "topic_key": topic.key,
                "identifier": default_identifier(topic.key, subscriber.subscriber_id),
                "created_at": now,
                "updated_at": now,
            }
            for subscriber in subscribers
        ]
        insert = postgresql_insert if self.session.get_bind().dialect.name == "postgresql" else sqlite_insert
        for start in range(0, len(rows), INSERT_CHUNK):
            statement = insert(TopicSubscriber).values(rows[start : start + INSERT_CHUNK])
            await self.session.execute(
                statement.on_conflict_do_nothing(index_elements=["topic_id", "subscriber_id"])
            )

    async def remove_members(self, topic: Topic, subscriber_ids: Sequence[str]) -> None:
        """Remove the members named by their subscriberIds; names that are not members are ignored."""
        unique_ids = list(dict.fromkeys(subscriber_ids))
        for start in range(0, len(unique_ids), LOOKUP_CHUNK):
            await self.session.execute(
                delete(TopicSubscriber).where(
                    TopicSubscriber.topic_id == topic.id,
                    TopicSubscriber.external_subscriber_id.in_(unique_ids[start : start + LOOKUP_CHUNK]),
                )
            )

    async def member_counts(self, topics: Sequence[Topic]) -> dict[str, int]:
        """How many members each topic has."""
        if not topics:
            return {}
        result = await self.session.execute(
            select(TopicSubscriber.topic_id, func.count())
            .where(TopicSubscriber.topic_id.in_([topic.id for topic in topics]))
            .group_by(TopicSubscriber.topic_id)
        )
        counts = {topic.id: 0 for topic in topics}
        counts.update({topic_id: int(count) for topic_id, count in result.all()})
        return counts

    async def member_page(self, topic: Topic, *, after_id: str | None, limit: int) -> list[TopicSubscriber]:
        """Up to ``limit`` members in the order they joined, after the membership ``after_id`` (keyset)."""
        conditions = [TopicSubscriber.topic_id == topic.id]
        if after_id:
            conditions.append(TopicSubscriber.id > after_id)
        result = await self.session.execute(select(TopicSubscriber).where(*conditions).order_by(TopicSubscriber.id).limit(limit))
        return list(result.scalars())

    async def get_membership(self, topic: Topic, subscriber: Subscriber) -> TopicSubscriber | None:
        result = await self.session.execute(
            select(TopicSubscriber).where(
                TopicSubscriber.topic_id == topic.id, TopicSubscriber.subscriber_id == subscriber.id
            )
        )
        return result.scalar_one_or_none()

    async def iter_member_ids(
        self,
        environment_id: str,
        *,
        keys: Sequence[str] = (),
        topic_ids: Sequence[str] = (),
        batch_size: int = MEMBER_BATCH,
    ) -> AsyncIterator[list[str]]:
        """The internal ids of the members of the named topics, in batches.

        Topics are named by key, by id, or both; unknown ones are skipped.
        A subscriber in several of them comes once. Batches are ordered by
        subscriber id and read with keyset pagination (``subscriber_id >
        last``), so a 100k-member topic is walked without loading it whole
        and without an OFFSET that grows with every page.
        """
        ids = set(topic_ids)
        if keys:
            result = await self.session.execute(
                select(Topic.id).where(Topic.environment_id == environment_id, Topic.key.in_(list(keys)))
            )
            ids.update(result.scalars())
        if not ids:
            return
        wanted = sorted(ids)
        last: str | None = None
        while True:
            query = select(TopicSubscriber.subscriber_id).where(
                TopicSubscriber.environment_id == environment_id, TopicSubscriber.topic_id.in_(wanted)
            )
            if last is not None:
                query = query.where(TopicSubscriber.subscriber_id > last)
            if len(wanted) > 1:
                query = query.distinct()
            result = await self.session.execute(
                query.order_by(TopicSubscriber.subscriber_id).limit(batch_size)
            )
            batch = list(result.scalars())
            if not batch:
                return
            yield batch
            if len(batch) < batch_size:
                return
            last = batch[-1]

    # --- v2: cursor lists and subscriptions -------------------------------------------

    async def topic_page(
        self, environment_id: str, params: CursorParams, *, key: str | None = None, name: str | None = None
    ) -> CursorPage:
        conditions: list[Any] = [Topic.environment_id == environment_id]
        if key is not None:
            conditions.append(Topic.key == key)
        if name is not None:
            conditions.append(Topic.name == name)
        return await cursor_page(self.session, Topic, conditions, params, TOPIC_ORDER)

    async def delete_with_subscriptions(self, topic: Topic) -> None:
        await self.session.execute(delete(TopicSubscriber).where(TopicSubscriber.topic_id == topic.id))
        await self.session.delete(topic)
        await self.session.flush()

    async def subscription_page(
        self,
        environment_id: str,
        params: CursorParams,
        *,
        topic: Topic | None = None,
        subscriber: Subscriber | None = None,
        external_subscriber_id: str | None = None,
        topic_key: str | None = None,
    ) -> CursorPage:
        conditions: list[Any] = [TopicSubscriber.environment_id == environment_id]
        if topic is not None:
            conditions.append(TopicSubscriber.topic_id == topic.id)
        if subscriber is not None:
            conditions.append(TopicSubscriber.subscriber_id == subscriber.id)
        if external_subscriber_id is not None:
            conditions.append(TopicSubscriber.external_subscriber_id == external_subscriber_id)
        if topic_key is not None:
            conditions.append(TopicSubscriber.topic_key == topic_key)
        return await cursor_page(self.session, TopicSubscriber, conditions, params, SUBSCRIPTION_ORDER)

    async def subscription_by_identifier(self, topic: Topic, identifier: str) -> TopicSubscriber | None:
        result = await self.session.execute(
            select(TopicSubscriber).where(TopicSubscriber.topic_id == topic.id, TopicSubscriber.identifier == identifier)
        )
        return result.scalar_one_or_none()

    async def subscriptions_of(self, topic: Topic, subscriber_ids: Sequence[str]) -> dict[str, TopicSubscriber]:
        """The topic's subscriptions of the named subscribers (internal ids), by internal subscriber id."""
        found: dict[str, TopicSubscriber] = {}
        unique_ids = list(dict.fromkeys(subscriber_ids))
        for start in range(0, len(unique_ids), LOOKUP_CHUNK):
            result = await self.session.execute(
                select(TopicSubscriber).where(
                    TopicSubscriber.topic_id == topic.id,
                    TopicSubscriber.subscriber_id.in_(unique_ids[start : start + LOOKUP_CHUNK]),
                )
            )
            found.update((row.subscriber_id, row) for row in result.scalars())
        return found

    async def identifier_taken(self, topic: Topic, identifier: str, *, excluding_id: str | None = None) -> bool:
        query = select(TopicSubscriber.id).where(
            TopicSubscriber.topic_id == topic.id, TopicSubscriber.identifier == identifier
        )
        if excluding_id is not None:
            query = query.where(TopicSubscriber.id != excluding_id)
        return (await self.session.execute(query.limit(1))).first() is not None

    def add_subscription(self, subscription: TopicSubscriber) -> None:
        self.session.add(subscription)

    async def delete_subscriptions(self, subscriptions: Sequence[TopicSubscriber]) -> None:
        ids = [row.id for row in subscriptions]
        for start in range(0, len(ids), LOOKUP_CHUNK):
            await self.session.execute(delete(TopicSubscriber).where(TopicSubscriber.id.in_(ids[start : start + LOOKUP_CHUNK])))

    async def topics_by_ids(self, environment_id: str, ids: Sequence[str]) -> dict[str, Topic]:
        if not ids:
            return {}
        result = await self.session.execute(
            select(Topic).where(Topic.environment_id == environment_id, Topic.id.in_(list(set(ids))))
        )
        return {topic.id: topic for topic in result.scalars()}

    async def workflows_named(self, environment_id: str, names: Sequence[str]) -> dict[str, Workflow]:
        """The environment's workflows named by trigger identifier or _id, under each name that found one."""
        if not names:
            return {}
        wanted = list(set(names))
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
                (Workflow.trigger_identifier.in_(wanted)) | (Workflow.id.in_(wanted)),
            )
        )
        found: dict[str, Workflow] = {}
        for workflow in result.scalars():
            found[workflow.trigger_identifier] = workflow
            found[workflow.id] = workflow
        return found

    async def subscription_rules(
        self, environment_id: str, topic_ids: Sequence[str], subscriber_ids: Sequence[str]
    ) -> list[tuple[str, list[Any] | None]]:
        """(subscriber _id, preference rules) of each subscription of these subscribers to these topics.

        The engine's topic fan-out asks this once per batch of members (herald/engine/topic_preferences.py);
        both lists are bounded by the batch and the trigger's topics.
        """
        if not topic_ids or not subscriber_ids:
            return []
        rows: list[tuple[str, list[Any] | None]] = []
        for start in range(0, len(subscriber_ids), LOOKUP_CHUNK):
            chunk = list(subscriber_ids[start : start + LOOKUP_CHUNK])
            result = await self.session.execute(
                select(TopicSubscriber.subscriber_id, TopicSubscriber.preferences).where(
                    TopicSubscriber.environment_id == environment_id,
                    TopicSubscriber.topic_id.in_(list(topic_ids)),
                    TopicSubscriber.subscriber_id.in_(chunk),
                    # The range the chunk spans (a fan-out's batch is a run of the topic in subscriber_id
                    # order) bounds the index read whatever the planner believes: on a million-member topic
                    # seeded just before the trigger, without statistics yet, PostgreSQL read the whole topic
                    # for each batch's list (about 20 s a batch) instead of the batch's part of the index.
                    TopicSubscriber.subscriber_id.between(min(chunk), max(chunk)),
                )
            )
            rows.extend((row[0], row[1]) for row in result.all())
        return rows
