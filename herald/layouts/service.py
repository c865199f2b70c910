"""Layout use cases: Novu's v1 and v2 layout routes over the same rows, and the copy that
environment promotion makes.

A layout is HTML that wraps an environment's emails. Its content must place the
email where Novu's layouts mark it: ``{{{body}}}`` (v1) or ``{{content}}`` (v2);
either works through both APIs. An environment's first layout becomes its
default (Novu gives every environment one), which wraps the emails whose step
names no layout. Every write drops the engine's cached snapshot of the
environment's layouts (herald/layouts/cache.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.templates import TemplateError, check_template, render_bounded, render_email
from herald.kit.auth import Principal
from herald.kit.errors import ConflictError, NotFoundError, ValidationFailed
from herald.kit.ids import new_id
from herald.kit.text import slugify
from herald.kit.time import isoformat, utcnow
from herald.layouts.cache import layout_cache
from herald.layouts.repository import LayoutRepository
from herald.layouts.schemas import (
    CreateLayoutDto,
    CreateLayoutRequestDto,
    DuplicateLayoutDto,
    EmailLayoutRenderOutput,
    GenerateLayoutPreviewResponseDto,
    LayoutDto,
    LayoutPreviewPayloadExample,
    LayoutPreviewRequestDto,
    LayoutPreviewResult,
    LayoutResponseDto,
    UpdateLayoutDto,
    UpdateLayoutRequestDto,
    WorkflowInfoDto,
)
from herald.models import Layout
from herald.previews import service as previews

V1_ORIGIN = "novu-cloud-v1"
V2_ORIGIN = "novu-cloud"

DEFAULT_BODY = (
    "<!DOCTYPE html>\n"
    '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n</head>\n'
    '<body style="margin:0;padding:0;background-color:#f4f4f5;">\n'
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0"><tr>'
    '<td align="center" style="padding:24px 12px;">\n'
    '<table role="presentation" width="100%" cellpadding="0" cellspacing="0" border="0" '
    'style="max-width:600px;background-color:#ffffff;border-radius:8px;"><tr><td style="padding:32px;">\n'
    "{{content}}\n"
    "</td></tr></table>\n</td></tr></table>\n</body>\n</html>\n"
)
"""The body of a layout made through /v2/layouts, before its controls are set."""

PREVIEW_SUBSCRIBER = {
    "subscriberId": "123456",
    "firstName": "John",
    "lastName": "Doe",
    "email": "john.doe@example.com",
    "phone": "+1234567890",
    "locale": "en_US",
    "data": {},
}


# --------------------------------------------------------------------------- shapes


def to_v1(layout: Layout) -> LayoutDto:
    return LayoutDto.model_validate(
        {
            "_id": layout.id,
            "_organizationId": layout.organization_id,
            "_environmentId": layout.environment_id,
            "_creatorId": layout.creator_id,
            "name": layout.name,
            "identifier": layout.identifier,
            "description": layout.description or "",
            "content": layout.content,
            "variables": layout.variables or [],
            "isDefault": layout.is_default,
            "createdAt": isoformat(layout.created_at),
            "updatedAt": isoformat(layout.updated_at),
        }
    )


def to_v2(layout: Layout) -> LayoutResponseDto:
    return LayoutResponseDto.model_validate(
        {
            "_id": layout.id,
            "layoutId": layout.identifier,
            "slug": f"{slugify(layout.name) or 'layout'}_{layout.id}",
            "name": layout.name,
            "isDefault": layout.is_default,
            "isTranslationEnabled": layout.is_translation_enabled,
            "createdAt": isoformat(layout.created_at),
            "updatedAt": isoformat(layout.updated_at),
            "origin": layout.origin if layout.origin in (V1_ORIGIN, V2_ORIGIN) else V2_ORIGIN,
            "type": "REGULAR",
            "controls": {"values": {"email": {"body": layout.content, "editorType": layout.editor_type}}},
            # What the layout's body may use, as a JSON schema.
            "variables": {
                "type": "object",
                "properties": {"subscriber": {"type": "object"}, "payload": {"type": "object"}},
            },
        }
    )


# --------------------------------------------------------------------------- shared rules


async def check_content(content: str, field: str) -> None:
    """Refuse content that cannot wrap an email: a template that does not parse or names an unknown
    filter (check_template, the rule every step's template follows), no body placeholder, or one that
    does not render."""
    problems = check_template(content)
    if problems:
        raise ValidationFailed.field(field, f"{field}: template cannot be used: {problems[0]}", content[:200])
    try:
        await render_bounded(render_email, "", "", {}, layout=content)
    except TemplateError as exc:
        raise ValidationFailed.field(field, f"Layout content is not a usable layout: {exc.message}") from None


async def require_layout(session: AsyncSession, principal: Principal, key: str) -> Layout:
    layout = await LayoutRepository(session).get(principal.environment_id, key)
    if layout is None:
        raise NotFoundError(f"Layout not found for id {key}")
    return layout


def _changed(session: AsyncSession, environment_id: str) -> None:
    layout_cache.invalidate_after_commit(session, environment_id)


async def _insert(session: AsyncSession, layout: Layout, *, make_default: bool) -> Layout:
    repository = LayoutRepository(session)
    first = not await repository.has_default(layout.environment_id)
    if not await repository.insert(layout):
        raise ConflictError(f"Layout with identifier {layout.identifier} already exists in this environment")
    if (make_default or first) and not await repository.make_default(layout.environment_id, layout) and make_default:
        raise ConflictError("Another layout was made default at the same time; try again")
    _changed(session, layout.environment_id)
    return layout


def _new_layout(principal: Principal, **fields: Any) -> Layout:
    now = utcnow()
    return Layout(
        id=new_id(),
        environment_id=principal.environment_id,
        organization_id=principal.organization_id,
        creator_id=principal.api_key_id,
        created_at=now,
        updated_at=now,
        **fields,
    )


async def _save(session: AsyncSession, layout: Layout) -> None:
    layout.updated_at = utcnow()
    if not await LayoutRepository(session).flush():
        raise ConflictError(f"Layout with identifier {layout.identifier} already exists in this environment")
    _changed(session, layout.environment_id)


async def used_by(session: AsyncSession, environment_id: str, layout: Layout) -> list[WorkflowInfoDto]:
    """The workflows with an email step whose template names this layout (by identifier or id)."""
    keys = {layout.identifier, layout.id}
    found = []
    for name, identifier, steps in await LayoutRepository(session).workflows(environment_id):
        for step in steps:
            template = step.get("template") if isinstance(step, dict) else None
            if isinstance(template, dict) and template.get("type") == "email" and template.get("layoutId") in keys:
                found.append(WorkflowInfoDto(name=name, workflowId=identifier))
                break
    return found


# --------------------------------------------------------------------------- v1


async def create_v1(session: AsyncSession, principal: Principal, body: CreateLayoutRequestDto) -> Layout:
    await check_content(body.content, "content")
    layout = _new_layout(
        principal,
        identifier=body.identifier,
        name=body.name,
        description=body.description or "",
        content=body.content,
        editor_type="html",
        variables=body.variables or [],
        is_default=False,
        origin=V1_ORIGIN,
    )
    return await _insert(session, layout, make_default=bool(body.isDefault))


async def list_page(
    session: AsyncSession,
    principal: Principal,
    *,
    offset: int,
    limit: int,
    order_by: str = "createdAt",
    descending: bool = True,
    query: str | None = None,
) -> tuple[Sequence[Layout], int]:
    return await LayoutRepository(session).page(
        principal.environment_id, offset=offset, limit=limit, order_by=order_by, descending=descending, query=query
    )


async def update_v1(session: AsyncSession, principal: Principal, key: str, body: UpdateLayoutRequestDto) -> Layout:
    layout = await require_layout(session, principal, key)
    sent = body.model_fields_set
    if "content" in sent and body.content is not None:
        await check_content(body.content, "content")
        layout.content = body.content
        layout.editor_type = "html"
    if body.name is not None:
        layout.name = body.name
    if body.identifier is not None:
        layout.identifier = body.identifier
    if "description" in sent:
        layout.description = body.description or ""
    if body.variables is not None:
        layout.variables = body.variables
    if body.isDefault is False and layout.is_default:
        raise ConflictError("The default layout stays default until another layout is made default")
    await _save(session, layout)
    if body.isDefault and not await LayoutRepository(session).make_default(principal.environment_id, layout):
        raise ConflictError("Another layout was made default at the same time; try again")
    return layout


async def delete_v1(session: AsyncSession, principal: Principal, key: str) -> None:
    """As Novu's v1: the default layout, and a layout a workflow uses, are not deleted."""
    layout = await require_layout(session, principal, key)
    if layout.is_default:
        raise ConflictError(f"Layout with id {key} is being used as your default layout, so it can not be deleted")
    if await used_by(session, principal.environment_id, layout):
        raise ConflictError(f"Layout with id {key} is being used so it can not be deleted")
    await LayoutRepository(session).remove(principal.environment_id, layout)
    _changed(session, principal.environment_id)


async def set_default(session: AsyncSession, principal: Principal, key: str) -> Layout:
    layout = await require_layout(session, principal, key)
    if not layout.is_default:
        if not await LayoutRepository(session).make_default(principal.environment_id, layout):
            raise ConflictError("Another layout was made default at the same time; try again")
        layout.updated_at = utcnow()
        _changed(session, principal.environment_id)
    return layout


# --------------------------------------------------------------------------- v2


async def create_v2(session: AsyncSession, principal: Principal, body: CreateLayoutDto) -> Layout:
    layout = _new_layout(
        principal,
        identifier=body.layoutId,
        name=body.name,
        content=DEFAULT_BODY,
        editor_type="html",
        variables=[],
        is_default=False,
        is_translation_enabled=body.isTranslationEnabled,
        origin=V2_ORIGIN,
    )
    return await _insert(session, layout, make_default=False)


async def update_v2(session: AsyncSession, principal: Principal, key: str, body: UpdateLayoutDto) -> Layout:
    layout = await require_layout(session, principal, key)
    email = body.controlValues.email if body.controlValues is not None else None
    if email is not None:
        if email.editorType != "html":
            raise ValidationFailed.field(
                "controlValues.email.editorType",
                "Herald renders html layouts only: send editorType html",
                email.editorType,
            )
        await check_content(email.body, "controlValues.email.body")
        layout.content = email.body
        layout.editor_type = "html"
    layout.name = body.name
    layout.is_translation_enabled = body.isTranslationEnabled
    await _save(session, layout)
    return layout


async def delete_v2(session: AsyncSession, principal: Principal, key: str) -> None:
    """Deletes the layout, default or in use: emails that named it are sent without it from then on."""
    layout = await require_layout(session, principal, key)
    await LayoutRepository(session).remove(principal.environment_id, layout)
    _changed(session, principal.environment_id)


async def _free_identifier(repository: LayoutRepository, environment_id: str, base: str) -> str:
    candidate = base
    for _ in range(20):
        if not await repository.identifier_taken(environment_id, candidate):
            return candidate
        candidate = f"{base}-{new_id()[-6:]}"
    return f"{base}-{new_id()}"


async def duplicate(session: AsyncSession, principal: Principal, key: str, body: DuplicateLayoutDto) -> Layout:
    """A copy of the layout's content under a new name (and layoutId: the one sent, or one made from the name)."""
    source = await require_layout(session, principal, key)
    repository = LayoutRepository(session)
    identifier = body.layoutId or await _free_identifier(
        repository, principal.environment_id, slugify(body.name) or "layout"
    )
    layout = _new_layout(
        principal,
        identifier=identifier,
        name=body.name,
        description=source.description,
        content=source.content,
        editor_type=source.editor_type,
        variables=list(source.variables or []),
        is_default=False,
        is_translation_enabled=body.isTranslationEnabled,
        origin=V2_ORIGIN,
    )
    return await _insert(session, layout, make_default=False)


async def preview(
    session: AsyncSession, principal: Principal, key: str, body: LayoutPreviewRequestDto
) -> GenerateLayoutPreviewResponseDto:
    """The layout rendered around a placeholder, with an example subscriber (or the one sent)."""
    layout = await require_layout(session, principal, key)
    content = layout.content
    email = (body.controlValues or {}).get("email")
    if isinstance(email, dict) and isinstance(email.get("body"), str):
        content = email["body"]
    subscriber = {**PREVIEW_SUBSCRIBER, **((body.previewPayload.subscriber if body.previewPayload else None) or {})}
    variables = {"subscriber": subscriber, "payload": {}, "step": {}, "tenant": {}, "actor": {}}
    try:
        rendered = await previews.preview_layout(session, principal.environment_id, content, variables)
    except TemplateError as exc:
        raise ValidationFailed.field("controlValues.email.body", f"Layout cannot be rendered: {exc.message}") from None
    return GenerateLayoutPreviewResponseDto(
        previewPayloadExample=LayoutPreviewPayloadExample(subscriber=subscriber),
        result=LayoutPreviewResult(preview=EmailLayoutRenderOutput(body=rendered.html)),
    )


async def usage(session: AsyncSession, principal: Principal, key: str) -> list[WorkflowInfoDto]:
    layout = await require_layout(session, principal, key)
    return await used_by(session, principal.environment_id, layout)


# --------------------------------------------------------------------------- environment promotion


async def layouts_by_key(session: AsyncSession, environment_id: str) -> dict[str, Layout]:
    """An environment's layouts by their stable key (the identifier, Novu's ``layoutId``).

    The key is what a workflow step names and what is the same in every
    environment, so promotion matches a development layout to its production
    counterpart by it (ids differ between environments).
    """
    return {layout.identifier: layout for layout in await LayoutRepository(session).all_of(environment_id)}


@dataclass(frozen=True)
class CopiedLayout:
    layout: Layout
    created: bool


async def copy_layout(
    session: AsyncSession, source: Layout, target_environment_id: str, target_organization_id: str
) -> CopiedLayout:
    """Copy ``source`` into another environment: update the layout with its key there, or create it.

    Name, description, content, editor type, variables and translation setting
    are copied; the target keeps its own id and creation time. A source that is
    its environment's default becomes the target's default; a non-default
    source does not take the default away from the target's, but becomes it
    when the target has none (as an environment's first layout). The target must
    be an environment of the same organization; checking that the caller may
    write to it is the caller's part. Does not commit (the caller's
    transaction does), and drops the engine's cached layouts of the target
    once it commits.
    """
    if target_organization_id != source.organization_id:
        raise ValueError("a layout is copied only between environments of one organization")
    repository = LayoutRepository(session)
    target = await repository.get(target_environment_id, source.identifier)
    if target is not None and target.identifier != source.identifier:
        target = None  # matched by id, not by key: not the same layout
    created = target is None
    if target is None:
        now = utcnow()
        target = Layout(
            id=new_id(),
            environment_id=target_environment_id,
            organization_id=target_organization_id,
            identifier=source.identifier,
            creator_id=source.creator_id,
            origin=source.origin,
            is_default=False,
            created_at=now,
            updated_at=now,
        )
    target.name = source.name
    target.description = source.description or ""
    target.content = source.content
    target.editor_type = source.editor_type
    target.variables = list(source.variables or [])
    target.is_translation_enabled = source.is_translation_enabled
    target.updated_at = utcnow()
    if created:
        if not await repository.insert(target):
            raise ConflictError(
                f"Layout with identifier {source.identifier} was created meanwhile in the target environment"
            )
    elif not await repository.flush():
        raise ConflictError(
            f"Layout with identifier {source.identifier} could not be updated in the target environment"
        )
    if source.is_default or not await repository.has_default(target_environment_id):
        await repository.make_default(target_environment_id, target)
    layout_cache.invalidate_after_commit(session, target_environment_id)
    return CopiedLayout(layout=target, created=created)


async def remove_layout(session: AsyncSession, environment_id: str, layout: Layout) -> None:
    """Deletes an environment's layout for promotion (it is gone from the source), as the v2 delete does.

    Emails that named it are sent without it from then on. Does not commit.
    """
    await LayoutRepository(session).remove(environment_id, layout)
    _changed(session, environment_id)
