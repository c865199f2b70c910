"""The Variables page: the organization's environment variables, this environment's value of each
(a secret's never: it shows as set), and the workflows that read each."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import ConsoleDep
from herald.environment_variables import service

router = APIRouter()

MAX_LISTED = 500
MAX_SHOWN_CHARS = 200


@router.get("/variables")
async def variables_page(console: ConsoleDep, search: str = "") -> Response:
    console.authorize("workflows.read")
    search = search.strip()[:100]
    variables = list(await service.list_variables(console.db, console.principal, search or None))[:MAX_LISTED]
    used = await service.usage_of_each(console.db, console.principal, variables)
    environment_id = console.principal.environment_id
    rows = []
    for variable in variables:
        value = (variable.values or {}).get(environment_id)
        if variable.is_secret:
            # A secret's value never leaves the store, not even masked.
            shown = "Set" if value else "Not set"
        elif value is None:
            shown = "Not set"
        else:
            shown = value if len(value) <= MAX_SHOWN_CHARS else value[:MAX_SHOWN_CHARS] + "…"
        rows.append(
            {"key": variable.key, "secret": variable.is_secret, "value": shown, "set": value is not None, "used_by": used.get(variable.key, [])}
        )
    return console.render("variables.html", title="Variables", rows=rows, search=search)
