"""The policy table: every role against every kind of action, and API keys as actors."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from herald.kit.errors import ForbiddenError
from herald.members.policy import ACTIONS, ROLES, ApiKeyActor, MemberActor, allows, authorize

# Written out here, from the roles' description, rather than read from the table it checks.
READS = {
    "activity.read", "workflows.read", "subscribers.read", "integrations.read", "api_keys.read",
    "webhooks.read", "members.read", "audit.read", "analytics.read", "environments.read",
}
AUTHOR = {
    "workflows.write", "layouts.write", "translations.write", "subscribers.write", "subscribers.import",
    "topics.write", "test_sends.send",
}
ADMIN_ONLY = {
    "integrations.write", "api_keys.reveal", "api_keys.regenerate", "environments.create", "environments.write",
    "environments.publish", "webhooks.write", "members.invite", "members.write",
}
ORGANIZATION = {"members.invite", "members.write", "environments.create"}
EXPECTED = {
    "owner": READS | AUTHOR | ADMIN_ONLY,
    "admin": READS | AUTHOR | ADMIN_ONLY,
    "author": READS | AUTHOR,
    "viewer": READS,
}


@dataclass
class Env:
    id: str
    name: str
    protected: bool = False


def test_the_table_names_every_action_once() -> None:
    assert ACTIONS == READS | AUTHOR | ADMIN_ONLY | {"secrets.read"}


@pytest.mark.parametrize("role", ROLES)
def test_every_role_against_every_action(role: str) -> None:
    actor = MemberActor("m", "o", role, "m@example.com")
    for action in sorted(ACTIONS):
        assert allows(actor, action) == (action in EXPECTED[role]), (role, action)
        if action in EXPECTED[role]:
            authorize(actor, action)
        else:
            with pytest.raises(ForbiddenError):
                authorize(actor, action)


def test_nobody_reads_a_secret() -> None:
    for role in ROLES:
        assert not allows(MemberActor("m", "o", role, "m@example.com"), "secrets.read")
    assert not allows(ApiKeyActor("e", "o", "k"), "secrets.read")


def test_an_unknown_action_is_a_bug_not_a_refusal() -> None:
    with pytest.raises(ValueError):
        allows(MemberActor("m", "o", "owner", "m@example.com"), "workflows.delete_everything")


def test_an_api_key_changes_its_own_environment_and_only_unprotected_others() -> None:
    own, other, protected = Env("dev", "Development"), Env("other", "Staging"), Env("prod", "Production", protected=True)
    key = ApiKeyActor("dev", "o", "key-1")
    for action in sorted(ACTIONS - {"secrets.read", "api_keys.reveal"}):
        assert allows(key, action, own), action
        assert allows(key, action, other), action
        # Organization-wide actions are not changes of the environment named.
        assert allows(key, action, protected) == (action in READS | ORGANIZATION), action
    # Revealing keys is the console's, for owners and admins, never a key's.
    assert not allows(key, "api_keys.reveal", own)
    # A protected environment's own key changes it.
    assert allows(ApiKeyActor("prod", "o", "key-2"), "workflows.write", protected)


def test_a_protected_environment_takes_changes_from_members_allowed_to_publish() -> None:
    protected = Env("prod", "Production", protected=True)
    for role in ROLES:
        actor = MemberActor("m", "o", role, "m@example.com")
        assert allows(actor, "workflows.write", protected) == (role in ("owner", "admin")), role
        assert allows(actor, "workflows.read", protected)
    with pytest.raises(ForbiddenError, match="Production is protected"):
        authorize(ApiKeyActor("dev", "o", "k"), "workflows.write", protected)
