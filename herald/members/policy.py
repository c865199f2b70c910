"""Who may do what: THE table of roles and actions, for the console and the API alike.

An action is a string ``<resource>.<verb>`` (``workflows.write``,
``api_keys.reveal``). Every state-changing console handler calls
:func:`authorize` before the service call, and every page asks :func:`allows`
before showing a control, so a refused action is neither shown nor possible.
The same table answers for API keys (:class:`ApiKeyActor`): a key may do
everything in its own environment, and in another only what the
protected-environment rule (:func:`may_change_environment`) lets it.

Novu's four roles:

- ``owner``: everything.
- ``admin``: everything, but changing or removing an owner (checked by
  herald.members.service, which knows the member changed).
- ``author``: reads everything but revealing API keys; writes workflows,
  layouts, translations, subscribers, topics, imports and test sends; not
  integrations, API keys, members, webhooks, environments or publishing.
- ``viewer``: reads everything but secrets; changes nothing.

``secrets.read`` is granted to no one: secrets are write-only (a set secret
shows as set, never its value). ``api_keys.reveal`` is the one exception,
for owners and admins, and every reveal is in the audit log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from herald.kit.errors import ForbiddenError

ROLES = ("owner", "admin", "author", "viewer")

READS = frozenset(
    {
        "activity.read",
        "workflows.read",
        "subscribers.read",
        "integrations.read",
        "api_keys.read",
        "webhooks.read",
        "members.read",
        "audit.read",
        "analytics.read",
        "environments.read",
    }
)
AUTHOR_WRITES = frozenset(
    {
        "workflows.write",
        "layouts.write",
        "translations.write",
        "subscribers.write",
        "subscribers.import",
        "topics.write",
        "test_sends.send",
    }
)
ADMIN_WRITES = frozenset(
    {
        "integrations.write",
        "api_keys.reveal",
        "api_keys.regenerate",
        "environments.create",
        "environments.write",
        "environments.publish",
        "webhooks.write",
        "members.invite",
        "members.write",
    }
)
# Actions on the organization, not on an environment: a protected environment does not change them.
ORGANIZATION_WIDE = frozenset({"members.invite", "members.write", "environments.create"})
# Granted to nobody: a secret's value never leaves the store (api_keys.reveal is its own action).
NEVER = frozenset({"secrets.read"})
ACTIONS = READS | AUTHOR_WRITES | ADMIN_WRITES | NEVER

POLICY: dict[str, frozenset[str]] = {
    "owner": READS | AUTHOR_WRITES | ADMIN_WRITES,
    "admin": READS | AUTHOR_WRITES | ADMIN_WRITES,
    "author": READS | AUTHOR_WRITES,
    "viewer": READS,
}

# What the console says for each role (the Members page and docs/console.md).
ROLE_DESCRIPTIONS = {
    "owner": "Everything, including managing owners",
    "admin": "Everything but changing or removing an owner",
    "author": "Reads everything; edits workflows, layouts, translations, subscribers and topics; imports and test sends",
    "viewer": "Reads everything but secrets; changes nothing",
}


@dataclass(frozen=True, slots=True)
class MemberActor:
    """A member signed in to the console."""

    member_id: str
    organization_id: str
    role: str
    email: str


@dataclass(frozen=True, slots=True)
class ApiKeyActor:
    """An API key: it acts for its own environment (herald.kit.auth.Principal)."""

    environment_id: str
    organization_id: str
    api_key_id: str


@dataclass(frozen=True, slots=True)
class CliActor:
    """The ``herald`` command, run by whoever holds the server's settings."""

    organization_id: str


@dataclass(frozen=True, slots=True)
class SystemActor:
    """Herald itself (a sweep, a worker's decision)."""

    organization_id: str


Actor = MemberActor | ApiKeyActor | CliActor | SystemActor


def may_change_environment(actor: Actor, environment: Any) -> bool:
    """Whether ``actor`` may change anything in ``environment`` (an Environment row), its role aside.

    An environment is ``protected`` (Production from the start,
    herald/environments/protection.py): an API key changes its own
    environment, another one only when it is not protected. A member may
    change a protected environment only with ``environments.publish``. The
    command line and Herald itself may.
    """
    if not environment.protected:
        return True
    if isinstance(actor, ApiKeyActor):
        return actor.environment_id == environment.id
    if isinstance(actor, MemberActor):
        return "environments.publish" in POLICY.get(actor.role, ())
    return True


def allows(actor: Actor, action: str, environment: Any = None) -> bool:
    """Whether ``actor`` may do ``action`` (in ``environment``, when the action changes one)."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    if action in NEVER:
        return False
    if isinstance(actor, MemberActor):
        if action not in POLICY.get(actor.role, ()):
            return False
    elif isinstance(actor, ApiKeyActor):
        # A key reads and changes its own environment; secrets and keys stay write-only as for members.
        if action == "api_keys.reveal":
            return False
    if environment is not None and action not in READS and action not in ORGANIZATION_WIDE:
        return may_change_environment(actor, environment)
    return True


def authorize(actor: Actor, action: str, environment: Any = None) -> None:
    """Raise 403 (Novu's error body) unless ``actor`` may do ``action``."""
    if not allows(actor, action, environment):
        raise ForbiddenError(refusal(actor, action, environment))


def refusal(actor: Actor, action: str, environment: Any = None) -> str:
    """Why ``action`` is refused, in a sentence (the 403's message)."""
    if isinstance(actor, MemberActor) and action not in POLICY.get(actor.role, ()):
        return f"Your role ({actor.role}) does not allow {action}"
    if environment is not None and environment.protected:
        return f"The environment {environment.name} is protected: only its own API keys and members allowed to publish may change it"
    return f"{action} is not allowed"
