"""Promoting changes from one environment to another: the kinds of resource that can be promoted.

A team edits in Development and promotes to Production (Novu's change
management): ``diff`` says what differs, ``publish`` copies it across. Both run
over a registry of *promotable kinds*, so a feature adds its own resource by
registering one kind, and diff and publish need no change.

A kind (:class:`PromotableKind`) says four things about its resource:

* ``name``: Herald's name of the kind (``"workflow"``), and ``resource_type``:
  the ``resourceType`` written in answers. novu-py 3.19 checks that field
  against ``REGULAR | ECHO | BRIDGE`` (its generated enum took the name of
  another of Novu's enums, the type of a workflow or a layout), so every kind
  answers ``REGULAR``: a workflow's and a layout's own type in Novu's answers,
  and a translation is of a regular workflow. A kind whose value the SDK does
  not know would make the SDK refuse the whole answer. A request's
  ``resourceType`` may name a kind by its name, one of its ``aliases`` (Novu's
  own names: ``layout``, ``localization_group``), or the answered value, which
  names every kind answered so (the ``resourceId`` then tells them apart).
* ``items(session, environment)``: the environment's items by a **stable key**,
  the same in every environment (a workflow's trigger identifier, a layout's
  identifier, a translation's workflow identifier and locale), each as a
  :class:`PromotableItem` whose ``content`` is what is compared: two items with
  equal content are unchanged. Content is plain JSON (it is also answered as
  the diff's previous and new state), without ids or times that differ between
  environments by nature.
* ``copy(session, item, target, existing)``: make ``target``'s item of that key
  equal to ``item`` (``existing`` is the target's item, None when it has none).
* ``remove(session, existing, target)``: take the target's item away (it is no
  longer in the source).

A kind may also have ``order`` (publish applies kinds in ascending order: layouts
before workflows, as a workflow's email step names its layout by key; translations
after workflows) and ``part_changes(source, target)``: the changes of an
item's parts (a workflow's steps) as :class:`PartChange`, listed in the diff
after the item's own change (Novu lists a workflow's steps so).

Kinds run inside the request's transaction and never commit. ``copy`` and
``remove`` may raise a herald.kit.errors exception: that one item is reported
failed and the others are still published.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.environments.repository import EnvironmentRepository
from herald.kit.errors import HeraldError
from herald.kit.time import utcnow
from herald.layouts.service import copy_layout, layouts_by_key, remove_layout
from herald.models import Environment, Layout, NotificationGroup, Workflow
from herald.organizations.service import DEFAULT_GROUP_NAME
from herald.translations.service import TranslationRecord, copy_translation, list_translations, remove_translation


@dataclass
class PromotableItem:
    key: str
    id: str
    name: str
    content: dict[str, Any]
    updated_at: datetime | None = None
    # The kind's own loaded row, for its copy and remove; never compared.
    row: Any = field(default=None, compare=False, repr=False)


@dataclass
class PartChange:
    """A change to one part of an item (a step of a workflow): ``index``es are its places in each item."""

    action: str  # added | modified | deleted | moved | unchanged
    part_type: str | None
    source_id: str | None = None
    source_name: str | None = None
    target_id: str | None = None
    target_name: str | None = None
    previous_index: int | None = None
    new_index: int | None = None
    previous: dict[str, Any] | None = None
    new: dict[str, Any] | None = None


class PromotableKind(Protocol):
    name: str
    resource_type: str

    async def items(self, session: AsyncSession, environment: Environment) -> dict[str, PromotableItem]: ...

    async def copy(
        self, session: AsyncSession, item: PromotableItem, target: Environment, existing: PromotableItem | None
    ) -> None: ...

    async def remove(self, session: AsyncSession, existing: PromotableItem, target: Environment) -> None: ...


_KINDS: dict[str, PromotableKind] = {}


def register(kind: PromotableKind) -> PromotableKind:
    """Add a kind to diff and publish (once per name; registering a name again replaces it)."""
    _KINDS[kind.name] = kind
    return kind


def kinds() -> list[PromotableKind]:
    """The kinds in publishing order (``order``, then registration)."""
    return sorted(_KINDS.values(), key=lambda kind: getattr(kind, "order", 100))


def kinds_named(name: str) -> list[PromotableKind]:
    """The kinds a request names: by Herald's name or an alias (one kind), or by the resourceType answered (all so answered)."""
    lowered = name.lower()
    for kind in kinds():
        if lowered == kind.name or lowered in getattr(kind, "aliases", ()):
            return [kind]
    return [kind for kind in kinds() if name == kind.resource_type]


@dataclass
class Change:
    kind: PromotableKind
    action: str  # added | modified | deleted | unchanged
    source: PromotableItem | None
    target: PromotableItem | None

    @property
    def item(self) -> PromotableItem:
        item = self.source or self.target
        assert item is not None
        return item

    def named_by(self, resource_id: str) -> bool:
        return any(
            candidate is not None and resource_id in (candidate.id, candidate.key)
            for candidate in (self.source, self.target)
        )


async def compare(
    session: AsyncSession, source: Environment, target: Environment, only: Iterable[PromotableKind] | None = None
) -> list[Change]:
    """What differs between two environments, kind by kind, in key order within each kind."""
    changes: list[Change] = []
    for kind in only if only is not None else kinds():
        theirs = await kind.items(session, target)
        ours = await kind.items(session, source)
        for key in sorted(ours.keys() | theirs.keys()):
            mine, their = ours.get(key), theirs.get(key)
            if their is None:
                action = "added"
            elif mine is None:
                action = "deleted"
            else:
                action = "unchanged" if mine.content == their.content else "modified"
            changes.append(Change(kind, action, mine, their))
    return changes


SYNC_ACTIONS = {"added": "created", "modified": "updated", "deleted": "deleted"}


@dataclass
class Outcome:
    change: Change
    status: str  # successful | failed | skipped
    detail: str = ""  # the sync action, the error, or why it was skipped


async def publish(session: AsyncSession, changes: list[Change], target: Environment, *, dry_run: bool) -> list[Outcome]:
    """Apply each change to ``target`` (or only say what would be done, ``dry_run``).

    Each item is applied in a savepoint: one that fails is rolled back alone
    and reported, the others are kept.
    """
    outcomes: list[Outcome] = []
    for change in changes:
        if change.action == "unchanged":
            outcomes.append(Outcome(change, "skipped", "No changes to publish"))
            continue
        if not dry_run:
            try:
                async with session.begin_nested():
                    if change.action == "deleted":
                        assert change.target is not None
                        await change.kind.remove(session, change.target, target)
                    else:
                        assert change.source is not None
                        await change.kind.copy(session, change.source, target, change.target)
            except HeraldError as exc:
                outcomes.append(Outcome(change, "failed", str(exc.message)))
                continue
            except IntegrityError:
                # A concurrent write took the item's key in the target first.
                outcomes.append(Outcome(change, "failed", f"{change.item.key} was changed in the target meanwhile"))
                continue
        outcomes.append(Outcome(change, "successful", SYNC_ACTIONS[change.action]))
    return outcomes


# --------------------------------------------------------------------------- workflows

# A step's identities: made anew in each environment a step is created in, kept by a published copy.
_STEP_IDS = frozenset({"_id", "uuid", "_templateId", "_parentId"})


def _without_ids(step: dict[str, Any]) -> dict[str, Any]:
    """A step (and its variants) as compared: two environments' steps made alike are alike."""
    bare = {key: value for key, value in step.items() if key not in _STEP_IDS}
    if isinstance(bare.get("variants"), list):
        bare["variants"] = [_without_ids(v) if isinstance(v, dict) else v for v in bare["variants"]]
    return bare


class WorkflowKind:
    """Workflows, keyed by trigger identifier; a copy keeps the steps (and their ids) as they are.

    The workflow's group is matched by name in the target (its default group
    when it has none of that name). ``active`` is promoted with the rest: a
    workflow turned on in Development is on in Production once published.
    """

    name = "workflow"
    resource_type = "REGULAR"
    order = 20

    async def items(self, session: AsyncSession, environment: Environment) -> dict[str, PromotableItem]:
        repository = EnvironmentRepository(session)
        groups = {group.id: group.name for group in await repository.groups_of(environment.id)}
        return {
            workflow.trigger_identifier: PromotableItem(
                key=workflow.trigger_identifier,
                id=workflow.id,
                name=workflow.name,
                content=self._content(workflow, groups.get(workflow.notification_group_id)),
                updated_at=workflow.updated_at,
                row=workflow,
            )
            for workflow in await repository.workflows_of(environment.id)
        }

    def part_changes(self, source: PromotableItem | None, target: PromotableItem | None) -> list[PartChange]:
        """The steps: matched by ``uuid`` (a published step keeps it), else by name; compared without ids."""
        mine: list[dict[str, Any]] = list(source.row.steps or []) if source is not None else []
        theirs: list[dict[str, Any]] = list(target.row.steps or []) if target is not None else []
        unmatched = dict(enumerate(theirs))
        changes = []
        for index, step in enumerate(mine):
            match = next((j for j, other in unmatched.items() if other.get("uuid") == step.get("uuid")), None)
            if match is None:
                match = next((j for j, other in unmatched.items() if other.get("name") == step.get("name")), None)
            kind = (step.get("template") or {}).get("type")
            if match is None:
                changes.append(
                    PartChange(
                        "added", kind, step.get("_id"), step.get("name"), new_index=index, new=_without_ids(step)
                    )
                )
                continue
            other = unmatched.pop(match)
            before, after = _without_ids(other), _without_ids(step)
            action = "modified" if before != after else "moved" if match != index else "unchanged"
            changes.append(
                PartChange(
                    action,
                    kind,
                    step.get("_id"),
                    step.get("name"),
                    other.get("_id"),
                    other.get("name"),
                    previous_index=match,
                    new_index=index,
                    previous=before if action == "modified" else None,
                    new=after if action == "modified" else None,
                )
            )
        for index, other in unmatched.items():
            changes.append(
                PartChange(
                    "deleted",
                    (other.get("template") or {}).get("type"),
                    target_id=other.get("_id"),
                    target_name=other.get("name"),
                    previous_index=index,
                    previous=_without_ids(other),
                )
            )
        return changes

    @staticmethod
    def _content(workflow: Workflow, group_name: str | None) -> dict[str, Any]:
        return {
            "name": workflow.name,
            "description": workflow.description,
            "triggerIdentifier": workflow.trigger_identifier,
            "active": workflow.active,
            "critical": workflow.critical,
            "severity": workflow.severity,
            "tags": list(workflow.tags or []),
            "preferenceSettings": dict(workflow.preference_settings or {}),
            "data": workflow.data,
            "notificationGroup": group_name,
            "isTranslationEnabled": workflow.is_translation_enabled,
            "steps": [_without_ids(step) for step in workflow.steps or []],
        }

    async def _group_in(self, session: AsyncSession, target: Environment, name: str | None) -> str:
        repository = EnvironmentRepository(session)
        groups = await repository.groups_of(target.id)
        for group in groups:
            if group.name == name:
                return group.id
        if groups:
            return groups[0].id
        group = NotificationGroup(
            environment_id=target.id, organization_id=target.organization_id, name=DEFAULT_GROUP_NAME
        )
        repository.add(group)
        await session.flush()
        return group.id

    async def copy(
        self, session: AsyncSession, item: PromotableItem, target: Environment, existing: PromotableItem | None
    ) -> None:
        source: Workflow = item.row
        now = utcnow()
        if existing is None:
            workflow = Workflow(
                environment_id=target.id,
                organization_id=target.organization_id,
                creator_id=source.creator_id,
                trigger_identifier=source.trigger_identifier,
                deleted=False,
                created_at=now,
            )
            EnvironmentRepository(session).add(workflow)
        else:
            workflow = existing.row
        workflow.notification_group_id = await self._group_in(session, target, item.content["notificationGroup"])
        workflow.name = source.name
        workflow.description = source.description
        workflow.active = source.active
        workflow.draft = source.draft
        workflow.critical = source.critical
        workflow.is_translation_enabled = source.is_translation_enabled
        workflow.severity = source.severity
        workflow.tags = list(source.tags or [])
        workflow.preference_settings = dict(source.preference_settings or {})
        workflow.data = source.data
        workflow.steps = list(source.steps or [])
        workflow.variables = list(source.variables or [])
        workflow.subscriber_variables = list(source.subscriber_variables or [])
        workflow.updated_at = now
        await session.flush()

    async def remove(self, session: AsyncSession, existing: PromotableItem, target: Environment) -> None:
        workflow: Workflow = existing.row
        now = utcnow()
        workflow.deleted = True
        workflow.deleted_at = now
        workflow.deleted_by = "publish"
        workflow.updated_at = now
        await session.flush()


register(WorkflowKind())


# --------------------------------------------------------------------------- layouts


class LayoutKind:
    """Layouts, keyed by identifier (Novu's ``layoutId``, what an email step names).

    Published before workflows, so a workflow that names a new layout finds it
    in the target. Being its environment's default is compared and promoted:
    a source default becomes the target's default (herald.layouts.service.copy_layout).
    """

    name = "layout"
    aliases = ("layouts",)
    resource_type = "REGULAR"
    order = 10

    async def items(self, session: AsyncSession, environment: Environment) -> dict[str, PromotableItem]:
        return {
            key: PromotableItem(
                key=key,
                id=layout.id,
                name=layout.name,
                content=self._content(layout),
                updated_at=layout.updated_at,
                row=layout,
            )
            for key, layout in (await layouts_by_key(session, environment.id)).items()
        }

    @staticmethod
    def _content(layout: Layout) -> dict[str, Any]:
        return {
            "layoutId": layout.identifier,
            "name": layout.name,
            "description": layout.description or "",
            "content": layout.content,
            "editorType": layout.editor_type,
            "variables": list(layout.variables or []),
            "isDefault": layout.is_default,
            "isTranslationEnabled": layout.is_translation_enabled,
        }

    async def copy(
        self, session: AsyncSession, item: PromotableItem, target: Environment, existing: PromotableItem | None
    ) -> None:
        await copy_layout(session, item.row, target.id, target.organization_id)

    async def remove(self, session: AsyncSession, existing: PromotableItem, target: Environment) -> None:
        await remove_layout(session, target.id, existing.row)


# --------------------------------------------------------------------------- translations


class TranslationKind:
    """A workflow's translation into one locale, keyed by ``workflowId:locale``.

    A translation names its workflow by trigger identifier, the same in every
    environment. Published after workflows, so it lands with (or after) its
    workflow. Translations of a layout name the layout by its id, which differs
    between environments, so they are not promoted.
    """

    name = "translation"
    aliases = ("translations", "localization_group")
    resource_type = "REGULAR"
    order = 30

    async def items(self, session: AsyncSession, environment: Environment) -> dict[str, PromotableItem]:
        items = {}
        for record in await list_translations(session, environment.id):
            if record.resource_type != "workflow":
                continue
            key = f"{record.resource_id}:{record.locale}"
            items[key] = PromotableItem(
                key=key,
                id=record.id,
                name=f"{record.resource_id} ({record.locale})",
                content={"workflowId": record.resource_id, "locale": record.locale, "content": record.content},
                updated_at=record.updated_at,
                row=record,
            )
        return items

    async def copy(
        self, session: AsyncSession, item: PromotableItem, target: Environment, existing: PromotableItem | None
    ) -> None:
        record: TranslationRecord = item.row
        await copy_translation(session, record, target_environment_id=target.id, organization_id=target.organization_id)

    async def remove(self, session: AsyncSession, existing: PromotableItem, target: Environment) -> None:
        await remove_translation(session, target.id, existing.row)


register(LayoutKind())
register(TranslationKind())
