"""Cursor pagination as Novu's v2 lists answer it (``after``/``before``, ``next``/``previous``).

A cursor is the ``_id`` of an item of the list. The page is ordered by the
chosen column and then by id, so equal values still have one order; the
comparison is written as ``col > v OR (col = v AND id > i)`` so it runs the
same on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Query
from sqlalchemy import and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from herald.kit.errors import ValidationFailed

MAX_CURSOR_LIMIT = 100
# Novu stops counting a long list; the answer says so with totalCountCapped.
COUNT_CAP = 50_000


@dataclass(frozen=True)
class CursorParams:
    after: str | None = None
    before: str | None = None
    limit: int = 10
    order_direction: Literal["ASC", "DESC"] = "DESC"
    order_by: str = "createdAt"
    include_cursor: bool = False


def cursor_params(
    after: Annotated[str | None, Query(max_length=64, description="The _id of the item the page starts after")] = None,
    before: Annotated[str | None, Query(max_length=64, description="The _id of the item the page ends before")] = None,
    limit: Annotated[float, Query(ge=1, le=MAX_CURSOR_LIMIT, description="Items per page")] = 10,
    orderDirection: Annotated[Literal["ASC", "DESC"], Query(description="Sort direction")] = "DESC",
    orderBy: Annotated[str, Query(max_length=64, description="createdAt, updatedAt or _id")] = "createdAt",
    includeCursor: Annotated[bool, Query(description="Include the cursor's own item in the page")] = False,
) -> CursorParams:
    if after is not None and before is not None:
        raise ValidationFailed.field("after", "after and before cannot be used together", after)
    return CursorParams(
        after=after,
        before=before,
        limit=int(limit),
        order_direction=orderDirection,
        order_by=orderBy,
        include_cursor=includeCursor,
    )


CursorDep = Annotated[CursorParams, Depends(cursor_params)]


@dataclass
class CursorPage:
    items: list[Any]
    next: str | None
    previous: str | None
    total: int
    total_capped: bool

    def answer(self, data: list[Any]) -> dict[str, Any]:
        return {
            "data": data,
            "next": self.next,
            "previous": self.previous,
            "totalCount": self.total,
            "totalCountCapped": self.total_capped,
        }


def _beyond(column: Any, id_column: Any, value: Any, item_id: str, *, forward: bool, inclusive: bool) -> Any:
    """Rows after (``forward``) or before the point (value, id) in ascending (column, id) order."""
    if forward:
        return or_(column > value, and_(column == value, id_column >= item_id if inclusive else id_column > item_id))
    return or_(column < value, and_(column == value, id_column <= item_id if inclusive else id_column < item_id))


async def cursor_page(
    session: AsyncSession,
    model: Any,
    conditions: Sequence[Any],
    params: CursorParams,
    order_columns: Mapping[str, InstrumentedAttribute[Any]],
) -> CursorPage:
    """One page of ``model`` rows matching ``conditions`` (which must carry the environment scope)."""
    column = order_columns.get(params.order_by)
    if column is None:
        raise ValidationFailed.field("orderBy", f"orderBy must be one of {', '.join(order_columns)}", params.order_by)
    id_column = model.id
    counted = (
        await session.execute(
            select(func.count()).select_from(select(id_column).where(*conditions).limit(COUNT_CAP + 1).subquery())
        )
    ).scalar_one()
    total = min(int(counted), COUNT_CAP)

    ascending = params.order_direction == "ASC"
    cursor_id = params.after or params.before
    # Reading toward the end of the list (``after`` or no cursor) or toward its start (``before``).
    toward_end = params.before is None
    forward = toward_end == ascending  # in ascending (column, id) terms
    query = select(model).where(*conditions)
    anchor: tuple[Any, str] | None = None
    if cursor_id is not None:
        row = (await session.execute(select(column, id_column).where(*conditions, id_column == cursor_id))).first()
        if row is None:
            query = query.where(false())
        else:
            anchor = (row[0], row[1])
            query = query.where(
                _beyond(column, id_column, anchor[0], anchor[1], forward=forward, inclusive=params.include_cursor)
            )
    order = (column.asc(), id_column.asc()) if forward else (column.desc(), id_column.desc())
    rows = list((await session.execute(query.order_by(*order).limit(params.limit + 1))).scalars())
    more = len(rows) > params.limit
    rows = rows[: params.limit]
    if not toward_end:
        rows.reverse()

    async def exists_beyond(item: Any, *, ahead: bool) -> bool:
        value = getattr(item, column.key)
        beyond = _beyond(column, id_column, value, item.id, forward=ahead == ascending, inclusive=False)
        return (await session.execute(select(id_column).where(*conditions, beyond).limit(1))).first() is not None

    next_cursor: str | None = None
    previous_cursor: str | None = None
    if rows:
        if toward_end:
            next_cursor = rows[-1].id if more else None
            if anchor is not None and await exists_beyond(rows[0], ahead=False):
                previous_cursor = rows[0].id
        else:
            previous_cursor = rows[0].id if more else None
            if await exists_beyond(rows[-1], ahead=True):
                next_cursor = rows[-1].id
    return CursorPage(rows, next_cursor, previous_cursor, total, int(counted) > COUNT_CAP)
