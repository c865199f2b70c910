"""An invite is emailed through the environment's active email integration (the engine's SMTP provider)."""

from __future__ import annotations

import re

import httpx

from tests.fixtures.console import ConsoleAs, unique_email
from tests.fixtures.peers import SmtpPeer


async def test_an_invite_is_emailed_when_the_environment_has_an_email_integration(
    api: httpx.AsyncClient, console_as: ConsoleAs, smtp: SmtpPeer
) -> None:
    owner = await console_as("owner")
    # Without an active email integration the link is only shown.
    first = unique_email("not-mailed")
    shown = await owner.post_form("/console/members/invite", {"email": first, "role": "viewer"})
    assert shown.status_code == 200 and "/console/invite/" in shown.text and "emailed" not in shown.text
    created = await api.post(
        "/v1/integrations",
        json={
            "providerId": "nodemailer",
            "channel": "email",
            "active": True,
            "credentials": {"host": "127.0.0.1", "port": str(smtp.port), "from": "herald@example.com", "ignoreTls": True},
        },
    )
    assert created.status_code == 201, created.text
    email = unique_email("mailed")
    invited = await owner.post_form("/console/members/invite", {"email": email, "role": "author"})
    assert invited.status_code == 200
    assert f"It is also emailed to {email}" in invited.text
    [link] = re.findall(r"http://herald\.test/console/invite/[A-Za-z0-9_-]+", invited.text)
    [mail] = [mail for mail in smtp.received if email in mail.rcpt_tos]
    body = mail.data.decode()
    assert "You are invited to Herald" in body and link in body and "author" in body
    assert all(first not in mail.rcpt_tos for mail in smtp.received)
