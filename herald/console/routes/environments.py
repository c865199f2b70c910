"""The Environments page: the organization's environments, whether each is protected, and a new one."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import ValidationError
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.environments import service
from herald.environments.schemas import CreateEnvironmentRequest
from herald.kit.errors import HeraldError
from herald.members.repository import MemberRepository

router = APIRouter()


async def _page(console: Console, *, status_code: int = 200, name: str = "", created: tuple[str, str] | None = None) -> Response:
    console.authorize("environments.read")
    environments = await service.list_environments(console.db, console.principal)
    rows = {row.id: row for row in console.environments}
    return console.render(
        "environments.html",
        title="Environments",
        status_code=status_code,
        listed=environments,
        rows=rows,
        max_environments=console.settings.max_environments,
        name=name,
        created_name=created[0] if created else None,
        created_key=created[1] if created else None,
    )


@router.get("/environments")
async def environments_page(console: ConsoleDep) -> Response:
    return await _page(console)


@router.post("/environments")
async def create_environment(console: ConsoleDep) -> Response:
    console.authorize("environments.create")
    form = await console.form()
    name = console.field(form, "name", 200)
    try:
        request = CreateEnvironmentRequest(name=name)
        made = await service.create(
            console.db,
            console.principal,
            request,
            console.request.app.state.secret_box,
            max_environments=console.settings.max_environments,
        )
    except (ValidationError, HeraldError) as exc:
        console.form_refusal(exc, "name", {"name": "Enter a name of 1 to 100 characters"})
        return await _page(console, status_code=getattr(exc, "status_code", 422), name=name)
    console.record("environment.created", "environment", made.id, changes={"name": made.name}, organization_wide=True)
    # The Environment select lists them too: read them again so it has the new one.
    console.environments = list(await MemberRepository(console.db).environments(console.organization_id))
    key = made.apiKeys[0].key if made.apiKeys else ""
    return await _page(console, created=(made.name, key))


@router.post("/environments/{environment_id}/protection")
async def change_protection(environment_id: str, console: ConsoleDep) -> Response:
    form = await console.form()
    protected = console.field(form, "protected", 10) == "true"
    environment = await service.set_protected(console.db, console.actor, environment_id[:100], protected)
    console.record(
        "environment.protected" if protected else "environment.unprotected",
        "environment",
        environment.id,
        changes={"protected": protected},
        organization_wide=True,
    )
    state = "protected" if protected else "no longer protected"
    return console.redirect("/console/environments", flash=f"{environment.name} is {state}")
