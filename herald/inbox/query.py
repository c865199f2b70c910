"""The Inbox's query strings as @novu/js and novu-py send them, read alike by the subscriber-token routes
(/v1/inbox) and the API-key routes (/v2/subscribers/{subscriberId}/notifications)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from herald.inbox import service
from herald.kit.errors import ValidationFailed


def flag(request: Request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise ValidationFailed.field(name, f"{name} must be a boolean value", raw)


def number(request: Request, name: str) -> float | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValidationFailed.field(name, f"{name} must be a number (milliseconds since the epoch)", raw) from None


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


def filter_input(request: Request) -> tuple[service.FilterInput, Any, Any]:
    """The list's filters from the query, with the tags and severity as given (the answer echoes them)."""
    tags = query_tags(request)
    severity = query_severity(request)
    given = service.FilterInput(
        read=flag(request, "read"),
        seen=flag(request, "seen"),
        archived=flag(request, "archived"),
        snoozed=flag(request, "snoozed"),
        tag_groups=service.tag_groups(tags),
        severities=service.severities(severity),
        data=service.parse_data(request.query_params.get("data")),
        created_gte=number(request, "createdGte"),
        created_lte=number(request, "createdLte"),
    )
    return given, tags, severity


MAX_FILTERS = 20


def count_filters(filters: str) -> tuple[list[Any], list[service.FilterInput]]:
    """The count route's ``filters``: a JSON array of 1 to MAX_FILTERS filter objects, as given and as read."""
    try:
        parsed = json.loads(filters)
    except ValueError:
        raise ValidationFailed.field("filters", "filters must be a JSON array of filter objects", filters) from None
    if not isinstance(parsed, list) or not parsed or len(parsed) > MAX_FILTERS:
        raise ValidationFailed.field("filters", f"filters must be a JSON array of 1 to {MAX_FILTERS} filters", filters)
    return parsed, [service.filter_from_json(item) for item in parsed]
