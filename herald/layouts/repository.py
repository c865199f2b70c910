"""The only place that queries layouts; every query takes the caller's environment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.models import Layout, Workflow

SORT_COLUMNS = {"createdAt": Layout.created_at, "updatedAt": Layout.updated_at, "name": Layout.name}


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class LayoutRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, environment_id: str, key: str) -> Layout | None:
        """The layout whose identifier (Novu's layoutId) or internal id is ``key``."""
        result = await self.session.execute(
            select(Layout)
            .where(Layout.environment_id == environment_id, or_(Layout.identifier == key, Layout.id == key))
            # An identifier that happens to be another layout's id: the identifier wins.
            .order_by((Layout.identifier == key).desc())
            .limit(1)
        )
        return result.scalar_one_or_none()

    async def identifier_taken(self, environment_id: str, identifier: str) -> bool:
        result = await self.session.execute(
            select(Layout.id).where(Layout.environment_id == environment_id, Layout.identifier == identifier).limit(1)
        )
        return result.first() is not None

    async def has_default(self, environment_id: str) -> bool:
        result = await self.session.execute(
            select(Layout.id).where(Layout.environment_id == environment_id, Layout.is_default.is_(True)).limit(1)
        )
        return result.first() is not None

    async def insert(self, layout: Layout) -> bool:
        """Insert a new layout; False when its identifier was taken meanwhile (a concurrent create)."""
        try:
            async with self.session.begin_nested():
                self.session.add(layout)
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def flush(self) -> bool:
        """Write pending changes; False when they break a unique key (an identifier taken meanwhile)."""
        try:
            async with self.session.begin_nested():
                await self.session.flush()
        except IntegrityError:
            return False
        return True

    async def make_default(self, environment_id: str, layout: Layout) -> bool:
        """``layout`` becomes the environment's only default (the others are cleared first, for the unique index).

        False when another transaction made a default meanwhile (the index refused a second one): the
        layout stays as it was.
        """
        try:
            async with self.session.begin_nested():
                await self.session.execute(
                    update(Layout)
                    .where(Layout.environment_id == environment_id, Layout.is_default.is_(True), Layout.id != layout.id)
                    .values(is_default=False)
                    .execution_options(synchronize_session="fetch")
                )
                layout.is_default = True
                await self.session.flush()
        except IntegrityError:
            layout.is_default = False
            return False
        return True

    async def remove(self, environment_id: str, layout: Layout) -> None:
        await self.session.execute(
            delete(Layout).where(Layout.environment_id == environment_id, Layout.id == layout.id)
        )

    async def page(
        self,
        environment_id: str,
        *,
        offset: int,
        limit: int,
        order_by: str = "createdAt",
        descending: bool = True,
        query: str | None = None,
    ) -> tuple[Sequence[Layout], int]:
        conditions: list[Any] = [Layout.environment_id == environment_id]
        if query:
            pattern = f"%{_escape_like(query.lower())}%"
            conditions.append(
                or_(
                    func.lower(Layout.name).like(pattern, escape="\\"),
                    func.lower(Layout.identifier).like(pattern, escape="\\"),
                )
            )
        total = (await self.session.execute(select(func.count()).select_from(Layout).where(*conditions))).scalar_one()
        column = SORT_COLUMNS.get(order_by, Layout.created_at)
        ordering = [column.desc(), Layout.id.desc()] if descending else [column.asc(), Layout.id.asc()]
        result = await self.session.execute(
            select(Layout).where(*conditions).order_by(*ordering).offset(offset).limit(limit)
        )
        return result.scalars().all(), int(total)

    async def all_of(self, environment_id: str) -> Sequence[Layout]:
        result = await self.session.execute(
            select(Layout).where(Layout.environment_id == environment_id).order_by(Layout.created_at, Layout.id)
        )
        return result.scalars().all()

    async def workflows(self, environment_id: str) -> Sequence[tuple[str, str, list[Any]]]:
        """(name, trigger identifier, steps) of the environment's workflows, for who uses a layout."""
        result = await self.session.execute(
            select(Workflow.name, Workflow.trigger_identifier, Workflow.steps)
            .where(Workflow.environment_id == environment_id, Workflow.deleted.is_(False))
            .order_by(Workflow.created_at, Workflow.id)
        )
        return [(name, identifier, steps or []) for name, identifier, steps in result.all()]
