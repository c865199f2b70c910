"""The Members page: who is in the organization, their roles, invites."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from herald.console.deps import Console, ConsoleDep
from herald.kit.errors import ConflictError, ValidationFailed
from herald.kit.outbound import OutboundPolicy
from herald.members import service
from herald.members.invite_mail import NO_INTEGRATION, email_invite
from herald.members.policy import ROLE_DESCRIPTIONS, ROLES

router = APIRouter()


async def _page(
    console: Console,
    *,
    status_code: int = 200,
    invite_link: str | None = None,
    invited: str = "",
    emailed: str | None = None,
    invite_email: str = "",
    invite_role: str = "viewer",
) -> Response:
    console.authorize("members.read")
    members = await service.list_members(console.db, console.organization_id)
    invites = await service.open_invites(console.db, console.organization_id) if console.allows("members.invite") else []
    owners = sum(1 for member in members if member.role == "owner")
    return console.render(
        "members.html",
        title="Members",
        status_code=status_code,
        members=members,
        invites=invites,
        roles=ROLES,
        role_descriptions=ROLE_DESCRIPTIONS,
        owners=owners,
        invite_link=invite_link,
        invited=invited,
        emailed=emailed,
        invite_email=invite_email,
        invite_role=invite_role,
    )


@router.get("/members")
async def members_page(console: ConsoleDep) -> Response:
    return await _page(console)


@router.post("/members/invite")
async def invite(console: ConsoleDep) -> Response:
    """The link is shown once, on this answer (its token is stored only hashed)."""
    console.authorize("members.invite")
    form = await console.form()
    email = console.field(form, "email", service.MAX_EMAIL_LENGTH)
    role = console.field(form, "role", 16)
    try:
        link = await service.invite(console.db, console.actor, email, role)
    except (ValidationFailed, ConflictError) as exc:
        console.errors_from(exc, "email")
        return await _page(console, status_code=exc.status_code, invite_email=email, invite_role=role)
    url = console.absolute_url(f"/console/invite/{link.token}")
    assert console.environment is not None
    not_sent = await email_invite(
        console.db,
        console.request.app.state.secret_box,
        OutboundPolicy.allowing(console.settings.outbound_allow),
        console.environment.id,
        to=link.invite.email or "",
        link=url,
        inviter=console.member.email,
        role=link.invite.role,
    )
    emailed = "sent" if not_sent is None else None if not_sent == NO_INTEGRATION else not_sent
    return await _page(console, invite_link=url, invited=link.invite.email or "", emailed=emailed)


@router.post("/members/{member_id}/role")
async def change_role(member_id: str, console: ConsoleDep) -> Response:
    form = await console.form()
    member = await service.change_role(console.db, console.actor, member_id, console.field(form, "role", 16))
    return console.redirect("/console/members", flash=f"{member.email} is now {member.role}")


@router.post("/members/{member_id}/remove")
async def remove(member_id: str, console: ConsoleDep) -> Response:
    member = await service.remove_member(console.db, console.actor, member_id)
    if member.id == console.member.id:
        return console.redirect("/console/sign-in", flash="You have left the organization")
    return console.redirect("/console/members", flash=f"{member.email} is removed")

