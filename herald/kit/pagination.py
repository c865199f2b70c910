"""Page-number pagination as Novu's v1 lists use it (``page`` from 0, ``limit``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query

MAX_PAGE_SIZE = 100


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


def paginated(items: list[Any], params: PageParams, total: int) -> dict[str, Any]:
    return {
        "data": items,
        "page": params.page,
        "pageSize": params.limit,
        "totalCount": total,
        "hasMore": params.offset + len(items) < total,
    }
