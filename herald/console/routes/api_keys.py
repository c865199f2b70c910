"""The API keys page: the chosen environment's keys masked, reveal (recorded) and regenerate (confirmed).

Revealing is a POST: it carries the CSRF token, and each reveal is one audit
entry. Regenerating asks first, on a page of its own (it works without
JavaScript); the old keys stop working at once in this process and within
about a second in the others (herald.kit.auth watches revocations).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.kit.auth import ApiKeyResolver
from herald.organizations import service

router = APIRouter()


async def _page(console: Console, *, revealed: tuple[str, str] | None = None, new_key: str | None = None) -> Response:
    console.authorize("api_keys.read")
    assert console.environment is not None
    keys = await service.list_keys(console.db, console.request.app.state.secret_box, console.environment.id)
    return console.render(
        "api_keys.html",
        title="API keys",
        keys=keys,
        revealed_id=revealed[0] if revealed else None,
        revealed_key=revealed[1] if revealed else None,
        new_key=new_key,
    )


@router.get("/api-keys")
async def api_keys_page(console: ConsoleDep) -> Response:
    return await _page(console)


@router.post("/api-keys/{key_id}/reveal")
async def reveal(key_id: str, console: ConsoleDep) -> Response:
    console.authorize("api_keys.reveal")
    assert console.environment is not None
    key = await service.reveal_key(console.db, console.request.app.state.secret_box, console.environment.id, key_id[:100])
    console.record("api_key.revealed", "api_key", key_id[:100])
    return await _page(console, revealed=(key_id, key))


@router.get("/api-keys/regenerate")
async def confirm_regenerate(console: ConsoleDep) -> Response:
    console.authorize("api_keys.regenerate")
    return console.render("api_keys_regenerate.html", title="Regenerate the API key")


@router.post("/api-keys/regenerate")
async def regenerate(console: ConsoleDep) -> Response:
    console.authorize("api_keys.regenerate")
    environment = console.environment
    assert environment is not None
    revoked, key = await service.regenerate_key(console.db, console.request.app.state.secret_box, environment)
    console.record("api_key.regenerated", "api_key", None, changes={"revoked": revoked})
    # Committed before this process forgets the old keys, so a request in between cannot cache one again.
    await console.db.commit()
    resolver: ApiKeyResolver | None = getattr(console.request.app.state, "api_keys", None)
    if resolver is not None:
        resolver.forget_environment(environment.id)
    return await _page(console, new_key=key)
