"""Who may change an environment: the one place the rule is written.

Environments are the organization's, and Novu lets any key of the
organization publish into any of them, sync a workflow into one, set another's
variable values or rename it. A key handed to a contractor for Development
then reaches Production. So an environment can be ``protected`` (Production
is, from the start): it takes changes only from its own API keys. Another
environment's key may still read it, diff against it and dry-run a publish
into it, as in Novu; what it may not do is change it. Unprotected environments
take changes from every key of the organization.

Whether an environment is protected is changed by its own keys (``PUT
/v1/environments/{id}``) or by the operator (``herald environments
protect|unprotect NAME``), never by another environment's key: otherwise a
Development key would lift the protection and then change Production.

Every service that changes an environment other than the caller's asks
:func:`require_change` (or :func:`require_protection_change`) before it
writes. The rule is written once, in the policy table
(herald.members.policy.may_change_environment), for API keys and the console's
members alike; this module says it in the API's words.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from herald.kit.auth import Principal
from herald.kit.errors import ForbiddenError
from herald.kit.schemas import ErrorResponse
from herald.members.policy import ApiKeyActor, MemberActor, authorize, may_change_environment
from herald.models import Environment

# What the routes that ask this module document besides the usual errors (OpenAPI ``responses``).
REFUSED: dict[int | str, dict[str, Any]] = {
    403: {"model": ErrorResponse, "description": "The environment is protected: only its own API keys may change it"}
}


def may_change(actor: Principal, environment: Environment) -> bool:
    """Whether the API key ``actor`` may change what ``environment`` holds (its resources, values, name, identifier).

    The rule itself is the policy table's (herald.members.policy.may_change_environment), which the
    console's members go through too: written once for every kind of actor.
    """
    return may_change_environment(ApiKeyActor(actor.environment_id, actor.organization_id, actor.api_key_id), environment)


def may_change_protection(actor: Principal, environment: Environment) -> bool:
    """Whether ``actor`` may protect ``environment`` or lift its protection: only the environment's own keys."""
    return environment.id == actor.environment_id


def require_change(actor: Principal, environments: Environment | Iterable[Environment]) -> None:
    """Refuse (403, Novu's error body) unless ``actor`` may change every one of ``environments``."""
    for environment in [environments] if isinstance(environments, Environment) else environments:
        if not may_change(actor, environment):
            raise ForbiddenError(
                f"Environment {environment.name} is protected: only its own API keys may change it"
            )


def require_protection_change(actor: Principal, environment: Environment) -> None:
    if not may_change_protection(actor, environment):
        raise ForbiddenError(
            f"Only the {environment.name} environment's own API keys may change whether it is protected"
        )


def require_member_protection_change(actor: MemberActor, environment: Environment) -> None:
    """Refuse (403) unless the console member ``actor`` may protect ``environment`` or lift its protection.

    Members go by the policy table: changing an environment is
    ``environments.write`` (owners and admins), and a protected one is changed
    only by members who may publish to it (:func:`may_change_environment`).
    """
    authorize(actor, "environments.write", environment)
