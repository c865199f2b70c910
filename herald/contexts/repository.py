from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.cursor import CursorPage, CursorParams, cursor_page
from herald.kit.ids import new_id
from herald.kit.time import utcnow
from herald.models import Context

ORDER_COLUMNS = {"createdAt": Context.created_at, "updatedAt": Context.updated_at, "_id": Context.id}


def _escape_like(value: str) -> str:
    return value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class ContextRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, environment_id: str, type_: str, key: str) -> Context | None:
        result = await self.session.execute(
            select(Context).where(Context.environment_id == environment_id, Context.type == type_, Context.key == key)
        )
        return result.scalar_one_or_none()

    async def insert(self, context: Context) -> bool:
        """Insert a new context; False when its type and id were taken meanwhile."""
        try:
            async with self.session.begin_nested():
                self.session.add(context)
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def delete(self, context: Context) -> None:
        await self.session.delete(context)
        await self.session.flush()

    async def page(
        self, environment_id: str, params: CursorParams, *, key: str | None = None, search: str | None = None
    ) -> CursorPage:
        conditions: list[Any] = [Context.environment_id == environment_id]
        if key is not None:
            conditions.append(Context.key == key)
        if search:
            conditions.append(Context.key.like(f"%{_escape_like(search)}%", escape="\\"))
        return await cursor_page(self.session, Context, conditions, params, ORDER_COLUMNS)

    async def upsert_many(
        self, environment_id: str, organization_id: str, entries: Sequence[tuple[str, str, dict[str, Any] | None]]
    ) -> None:
        """Make each (type, id) exist; one given with data gets that data, one without keeps its own.

        One statement per kind, with ON CONFLICT, so concurrent triggers naming a
        new context both succeed and a trigger costs a round trip or two, not a
        read and a write per context.
        """
        now = utcnow()
        insert = postgresql_insert if self.session.get_bind().dialect.name == "postgresql" else sqlite_insert

        def row(type_: str, key: str, data: dict[str, Any] | None) -> dict[str, Any]:
            return {
                "id": new_id(),
                "environment_id": environment_id,
                "organization_id": organization_id,
                "type": type_,
                "key": key,
                "data": data or {},
                "created_at": now,
                "updated_at": now,
            }

        # One row per (type, id): PostgreSQL refuses a statement that updates a row twice.
        wanted: dict[tuple[str, str], dict[str, Any] | None] = {}
        for type_, key, data in entries:
            if data is not None or (type_, key) not in wanted:
                wanted[(type_, key)] = data
        with_data = [row(type_, key, data) for (type_, key), data in wanted.items() if data is not None]
        without_data = [row(type_, key, None) for (type_, key), data in wanted.items() if data is None]
        index = ["environment_id", "type", "key"]
        if with_data:
            statement = insert(Context).values(with_data)
            await self.session.execute(
                statement.on_conflict_do_update(
                    index_elements=index, set_={"data": statement.excluded.data, "updated_at": now}
                )
            )
        if without_data:
            await self.session.execute(
                insert(Context).values(without_data).on_conflict_do_nothing(index_elements=index)
            )
