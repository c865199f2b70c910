"""The Inbox's query strings as @novu/js and novu-py send them, read alike by the subscriber-token routes
(/v1/inbox) and the API-key routes (/v2/subscribers/{subscriberId}/notifications)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from herald.inbox import service
from herald.kit import query as kit_query
from herald.kit.errors import ValidationFailed


def query_tags(request: Request) -> Any:
    """``tags[]=a&tags[]=b`` (one OR group, also ``tags=a``) or ``tags[0][]=a&tags[1][]=b`` (AND of OR groups)."""
    groups: dict[str, list[str]] = {}
    flat: list[str] = []
    for key, value in request.query_params.multi_items():
        if key in ("tags", "tags[]"):
            flat.append(value)
        elif key.startswith("tags[") and key.endswith("][]"):
            groups.setdefault(key[5:-3], []).append(value)
    if groups:
        return {"and": [{"or": values} for _, values in sorted(groups.items())]}
    return flat or None


def query_severity(request: Request) -> Any:
    values = request.query_params.getlist("severity[]") + request.query_params.getlist("severity")
    return values or None


def echo(given: service.FilterInput, tags: Any, severity: Any) -> dict[str, Any]:
    """The filter as the answer echoes it: what was given."""
    echoed = {
        "tags": tags,
        "read": given.read,
        "archived": given.archived,
        "snoozed": given.snoozed,
        "seen": given.seen,
        "data": given.data,
        "severity": severity,
        "createdGte": given.created_gte,
        "createdLte": given.created_lte,
    }
    return {key: value for key, value in echoed.items() if value is not None}


@dataclass(frozen=True)
class ListFilter:
    """The list's filters as read, with the tags and severity as given (the answer echoes them)."""

    given: service.FilterInput
    tags: Any
    severity: Any


# Documented as @novu/js and novu-py send them; tags and severity are also read in their other forms
# (``tags[0][]=a&tags[1][]=b``: an AND of OR groups), which no parameter of the document can name.
BooleanQuery = Annotated[str | None, Query(description="true or false")]
MillisQuery = Annotated[str | None, Query(description="Milliseconds since the epoch")]
TagsQuery = Annotated[list[str] | None, Query(description="Workflow tags, any of them (also tags[0][]=...: all groups)")]
SeverityQuery = Annotated[list[str] | None, Query(description="high, medium, low or none; any of them")]


def list_filter(
    request: Request,
    read: BooleanQuery = None,
    seen: BooleanQuery = None,
    archived: BooleanQuery = None,
    snoozed: Annotated[str | None, Query(description="true: snoozed now; false: not snoozed")] = None,
    tags: TagsQuery = None,
    bracketed_tags: Annotated[list[str] | None, Query(alias="tags[]", description="As tags")] = None,
    severity: SeverityQuery = None,
    bracketed_severity: Annotated[list[str] | None, Query(alias="severity[]", description="As severity")] = None,
    data: Annotated[
        str | None, Query(description="A JSON object the notification's data must match (see docs/inbox.md)")
    ] = None,
    createdGte: MillisQuery = None,
    createdLte: MillisQuery = None,
) -> ListFilter:
    """The list's filters from the query, each read and bounded (herald.kit.query)."""
    given_tags = query_tags(request)
    given_severity = query_severity(request)
    given = service.FilterInput(
        read=kit_query.flag("read", read),
        seen=kit_query.flag("seen", seen),
        archived=kit_query.flag("archived", archived),
        snoozed=kit_query.flag("snoozed", snoozed),
        tag_groups=service.tag_groups(given_tags),
        severities=service.severities(given_severity),
        data=service.parse_data(data),
        created_gte=_millis("createdGte", createdGte),
        created_lte=_millis("createdLte", createdLte),
    )
    return ListFilter(given, given_tags, given_severity)


ListFilterDep = Annotated[ListFilter, Depends(list_filter)]


def _millis(name: str, raw: str | None) -> float | None:
    return kit_query.number(name, raw, low=service.MIN_MILLIS, high=service.MAX_MILLIS, meaning=service.MILLIS_MEANING)


MAX_FILTERS = 20


def count_filters(filters: str) -> tuple[list[Any], list[service.FilterInput]]:
    """The count route's ``filters``: a JSON array of 1 to MAX_FILTERS filter objects, as given and as read."""
    parsed = kit_query.json_text("filters", filters)
    if not isinstance(parsed, list) or not parsed or len(parsed) > MAX_FILTERS:
        raise ValidationFailed.field("filters", f"filters must be a JSON array of 1 to {MAX_FILTERS} filters", filters)
    return parsed, [service.filter_from_json(item) for item in parsed]
