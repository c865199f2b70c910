"""The console's people: members of the organization, their sessions, invites and failed sign-ins (herald/members)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base, IdMixin


class Member(IdMixin, Base):
    """A person who signs in to the console, with one of Novu's four roles (herald/members/policy.py).

    ``email`` is stored lower-cased and is unique in the store, so an address
    names one member whichever organization asks. ``password_hash`` is an
    argon2id hash (null for a member who signs in only through single sign-on,
    whose ``oidc_subject`` names them at the identity provider).
    ``password_changed_at`` ends every session made before it.
    """

    __tablename__ = "members"
    __table_args__ = (Index("ix_members_organization_id", "organization_id"),)

    organization_id: Mapped[str] = mapped_column(ID, ForeignKey("organizations.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(String(320), unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    role: Mapped[str] = mapped_column(String(16))
    password_hash: Mapped[str | None] = mapped_column(String(255), default=None)
    oidc_subject: Mapped[str | None] = mapped_column(String(255), unique=True, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    password_changed_at: Mapped[datetime | None] = mapped_column(default=None)


class ConsoleSession(Base):
    """A signed-in browser: the cookie holds a random token, the store only its sha256.

    ``csrf_token`` is the token every state-changing request of this session
    must carry; ``environment_id`` is the environment the member chose (every
    page shows that one's data). A session ends at ``expires_at`` (7 days
    after sign-in) or after 12 hours without a request (``last_seen_at``,
    refreshed at most once a minute so that a page view is not a write).
    """

    __tablename__ = "console_sessions"
    __table_args__ = (
        Index("ix_console_sessions_member_id", "member_id"),
        Index("ix_console_sessions_expires_at", "expires_at"),
    )

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    member_id: Mapped[str] = mapped_column(ID, ForeignKey("members.id", ondelete="CASCADE"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    environment_id: Mapped[str | None] = mapped_column(ID, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    client_address: Mapped[str] = mapped_column(String(64), default="")
    user_agent: Mapped[str] = mapped_column(String(300), default="")


class MemberInvite(IdMixin, Base):
    """A one-time link to join the organization: an invite (7 days) or the first owner's set-up link (24 hours).

    ``kind`` is ``invite`` or ``setup``; the link's token is stored as its
    sha256 and works once (``used_at``).
    """

    __tablename__ = "member_invites"
    __table_args__ = (Index("ix_member_invites_organization_id", "organization_id"),)

    organization_id: Mapped[str] = mapped_column(ID, ForeignKey("organizations.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(16), default="invite")
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    email: Mapped[str | None] = mapped_column(String(320), default=None)
    role: Mapped[str] = mapped_column(String(16))
    created_by: Mapped[str | None] = mapped_column(ID, default=None)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
    used_at: Mapped[datetime | None] = mapped_column(default=None)


class SignInFailure(IdMixin, Base):
    """One failed sign-in: counted per (email, client address) over a window to refuse guessing (herald/members/throttle.py)."""

    __tablename__ = "sign_in_failures"
    __table_args__ = (
        Index("ix_sign_in_failures_email_client_at", "email", "client_address", "at"),
        Index("ix_sign_in_failures_at", "at"),
    )

    email: Mapped[str] = mapped_column(String(320))
    client_address: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime] = mapped_column(default=utcnow)


class SsoSignIn(Base):
    """A single sign-on begun in a browser and not finished yet (herald/members/sso.py).

    Named by the sha256 of its ``state`` (the browser holds the state in a
    cookie and brings it back from the identity provider); ``nonce`` must come
    back inside the ID token, ``code_verifier`` proves to the token endpoint
    that the code is this sign-in's (PKCE). Finishing deletes the row, so a
    state works once; an unfinished one lapses at ``expires_at``.
    """

    __tablename__ = "sso_sign_ins"
    __table_args__ = (Index("ix_sso_sign_ins_expires_at", "expires_at"),)

    state_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(64))
    code_verifier: Mapped[str] = mapped_column(String(128))
    next_path: Mapped[str] = mapped_column(String(500), default="/console")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column()
