"""Page-number pagination as Novu's v1 lists use it (``page`` from 0, ``limit``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query

MAX_PAGE_SIZE = 100
COUNT_AHEAD = 10_000
"""How many matches past a page the lists of messages and notifications count for ``totalCount``.

An exact count of an environment's messages reads every one of them: 2.8 s
(p50) on a PostgreSQL store of ten million, on every page asked for. Counting
stops this far past the page instead, so ``totalCount`` is exact whenever
fewer than this many matches follow the page, and otherwise says "at least
this many"; ``hasMore`` stays exact either way. Lists narrowed to a subscriber
or to transactions count every match (their own indexes keep that small).
"""


@dataclass(frozen=True)
class PageParams:
    page: int
    limit: int

    @property
    def offset(self) -> int:
        return self.page * self.limit


def page_params(
    page: Annotated[int, Query(ge=0, le=1_000_000, description="Page number, from 0")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE_SIZE, description="Items per page")] = 10,
) -> PageParams:
    return PageParams(page=page, limit=limit)


PageDep = Annotated[PageParams, Depends(page_params)]


def count_bound(offset: int, limit: int) -> int:
    """The most matches a list's count reads: its page and :data:`COUNT_AHEAD` more."""
    return offset + limit + COUNT_AHEAD


def paginated(items: list[Any], params: PageParams, total: int) -> dict[str, Any]:
    return {
        "data": items,
        "page": params.page,
        "pageSize": params.limit,
        "totalCount": total,
        "hasMore": params.offset + len(items) < total,
    }
