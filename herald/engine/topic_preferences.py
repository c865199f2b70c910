"""Topic subscriptions' preferences, applied when a trigger reaches subscribers through a topic.

A v2 subscription (``POST /v2/topics/{key}/subscriptions``) may carry
preference rules: ``{workflowId, enabled, condition}`` or ``{filter:
{workflowIds, tags}, enabled, condition}``. When a trigger goes to the topic,
each member's subscription is looked at for the triggered workflow: the rule
naming the workflow (by identifier or ``_id``) wins over a filter rule that
takes it (by id or tag); a subscription with no rule for the workflow takes
it. The rule must be enabled, and its ``condition`` (JSONLogic,
herald/engine/jsonlogic.py) must hold for ``{"payload": <the trigger's
payload>, "subscriber": {"subscriberId": ...}}``. A condition that cannot be
evaluated does not hold. A member subscribed through several of the trigger's
topics gets the notification when one of those subscriptions takes it.

This is one filter over each batch of members the fan-out pages through
(herald/engine/expand.py): one query per batch for the batch's subscriptions,
and one for the workflow only when a subscription has rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from herald.engine.jsonlogic import LogicError, matches
from herald.models import Event, Workflow
from herald.topics.repository import TopicRepository


@dataclass
class Screened:
    """The members a batch keeps, and what was left out and why (for the expansion's execution detail)."""

    kept: list[tuple[Event, str, str]]
    left_out: int = 0
    problems: list[str] = field(default_factory=list)


def _rule_for(rules: Sequence[Any], workflow: Workflow) -> dict[str, Any] | None:
    names = {workflow.id, workflow.trigger_identifier}
    tags = set(workflow.tags or [])
    by_filter = None
    for rule in rules:
        if not isinstance(rule, dict):
            continue
        if rule.get("workflowId") in names:
            return rule
        found = rule.get("filter")
        if by_filter is None and isinstance(found, dict):
            if names & set(found.get("workflowIds") or []) or tags & set(found.get("tags") or []):
                by_filter = rule
    return by_filter


def takes(rules: Sequence[Any] | None, workflow: Workflow, data: dict[str, Any], problems: list[str]) -> bool:
    """Whether a subscription with these rules takes this workflow's trigger (``data``: what conditions see)."""
    rule = _rule_for(rules or [], workflow)
    if rule is None:
        return True
    if rule.get("enabled", True) is False:
        return False
    condition = rule.get("condition")
    if not condition:
        return True
    try:
        return matches(condition, data)
    except LogicError as exc:
        if not problems:
            problems.append(f"a subscription's condition could not be evaluated: {exc}")
        return False


async def screen(
    session: AsyncSession, event: Event, topic_ids: Sequence[str], audience: list[tuple[Event, str, str]]
) -> Screened:
    """The topic members of one batch whose subscriptions take the event's workflow."""
    repository = TopicRepository(session)
    rows = await repository.subscription_rules(
        event.environment_id, topic_ids, [internal for _, internal, _ in audience]
    )
    if not any(rules for _, rules in rows):
        return Screened(kept=audience)
    workflow = (await repository.workflows_named(event.environment_id, [event.workflow_id])).get(event.workflow_id)
    if workflow is None:
        return Screened(kept=audience)
    by_subscriber: dict[str, list[list[Any] | None]] = {}
    for subscriber_id, rules in rows:
        by_subscriber.setdefault(subscriber_id, []).append(rules)
    screened = Screened(kept=[])
    for member in audience:
        _, internal, external = member
        data = {"payload": event.payload or {}, "subscriber": {"subscriberId": external}}
        subscriptions = by_subscriber.get(internal) or [None]
        if any(takes(rules, workflow, data, screened.problems) for rules in subscriptions):
            screened.kept.append(member)
        else:
            screened.left_out += 1
    return screened
