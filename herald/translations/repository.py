"""The only queries of translations and of the organization's locales; every one scoped by environment
(translations) or organization (locales, which Novu keeps on the organization)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from herald.kit.time import utcnow
from herald.models import Translation, TranslationLocales, Workflow


class TranslationRepository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # Workflows -------------------------------------------------------------

    async def workflow(self, environment_id: str, resource_id: str) -> Workflow | None:
        """The live workflow a resource id names: its identifier (Novu's workflowId), or its _id."""
        result = await self.session.execute(
            select(Workflow)
            .where(
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
                or_(Workflow.trigger_identifier == resource_id, Workflow.id == resource_id),
            )
            # The identifier wins over an _id that happens to equal another workflow's identifier.
            .order_by((Workflow.trigger_identifier == resource_id).desc())
            .limit(1)
        )
        return result.scalar_one_or_none()

    async def workflows(self, environment_id: str, resource_ids: Collection[str]) -> dict[str, Workflow]:
        """Live workflows by the resource ids given (identifier or _id), keyed by the id as given."""
        if not resource_ids:
            return {}
        ids = list(resource_ids)
        result = await self.session.execute(
            select(Workflow).where(
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
                or_(Workflow.trigger_identifier.in_(ids), Workflow.id.in_(ids)),
            )
        )
        found: dict[str, Workflow] = {}
        for workflow in result.scalars():
            if workflow.id in resource_ids:
                found.setdefault(workflow.id, workflow)
            if workflow.trigger_identifier in resource_ids:
                found[workflow.trigger_identifier] = workflow
        return found

    async def translated_workflow_identifiers(self, environment_id: str) -> list[str]:
        result = await self.session.execute(
            select(Workflow.trigger_identifier).where(
                Workflow.environment_id == environment_id,
                Workflow.deleted.is_(False),
                Workflow.is_translation_enabled.is_(True),
            )
        )
        return list(result.scalars())

    # Translations ------------------------------------------------------------

    async def get(self, environment_id: str, resource_type: str, resource_id: str, locale: str) -> Translation | None:
        result = await self.session.execute(
            select(Translation).where(
                Translation.environment_id == environment_id,
                Translation.resource_type == resource_type,
                Translation.resource_id == resource_id,
                Translation.locale == locale,
            )
        )
        return result.scalar_one_or_none()

    async def put(
        self,
        *,
        environment_id: str,
        organization_id: str,
        resource_type: str,
        resource_id: str,
        locale: str,
        content: dict[str, Any],
    ) -> Translation:
        """Create the locale's translation, or replace its content (Novu's create is an upsert)."""
        for _ in range(2):
            existing = await self.get(environment_id, resource_type, resource_id, locale)
            if existing is not None:
                existing.content = content
                existing.updated_at = utcnow()
                await self.session.flush()
                return existing
            translation = Translation(
                environment_id=environment_id,
                organization_id=organization_id,
                resource_type=resource_type,
                resource_id=resource_id,
                locale=locale,
                content=content,
            )
            try:
                async with self.session.begin_nested():
                    self.session.add(translation)
                    await self.session.flush()
            except IntegrityError:
                continue  # made meanwhile by a concurrent request: replace that one
            return translation
        raise RuntimeError("the translation kept changing")  # pragma: no cover

    async def for_resource(self, environment_id: str, resource_type: str, resource_id: str) -> Sequence[Translation]:
        result = await self.session.execute(
            select(Translation)
            .where(
                Translation.environment_id == environment_id,
                Translation.resource_type == resource_type,
                Translation.resource_id == resource_id,
            )
            .order_by(Translation.locale)
        )
        return result.scalars().all()

    async def for_locale(
        self, environment_id: str, resource_type: str, locale: str, resource_ids: Collection[str]
    ) -> Sequence[Translation]:
        if not resource_ids:
            return []
        result = await self.session.execute(
            select(Translation)
            .where(
                Translation.environment_id == environment_id,
                Translation.resource_type == resource_type,
                Translation.locale == locale,
                Translation.resource_id.in_(list(resource_ids)),
            )
            .order_by(Translation.resource_id)
        )
        return result.scalars().all()

    async def for_resources(
        self, environment_id: str, resource_type: str, resource_ids: Collection[str], locales: Collection[str]
    ) -> Sequence[Translation]:
        """The given locales' translations of the given resources: what the engine reads for a batch of steps."""
        if not resource_ids or not locales:
            return []
        result = await self.session.execute(
            select(Translation).where(
                Translation.environment_id == environment_id,
                Translation.resource_type == resource_type,
                Translation.resource_id.in_(list(resource_ids)),
                Translation.locale.in_(list(locales)),
            )
        )
        return result.scalars().all()

    async def all(self, environment_id: str) -> Sequence[Translation]:
        result = await self.session.execute(
            select(Translation)
            .where(Translation.environment_id == environment_id)
            .order_by(Translation.resource_type, Translation.resource_id, Translation.locale)
        )
        return result.scalars().all()

    async def delete(self, translation: Translation) -> None:
        await self.session.delete(translation)
        await self.session.flush()

    async def delete_resource(self, environment_id: str, resource_type: str, resource_id: str) -> int:
        result = await self.session.execute(
            delete(Translation).where(
                Translation.environment_id == environment_id,
                Translation.resource_type == resource_type,
                Translation.resource_id == resource_id,
            )
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    # Locales ---------------------------------------------------------------------

    async def locales(self, organization_id: str) -> TranslationLocales | None:
        return await self.session.get(TranslationLocales, organization_id)

    async def put_locales(
        self, organization_id: str, default_locale: str, target_locales: list[str]
    ) -> TranslationLocales:
        row = await self.locales(organization_id)
        if row is None:
            row = TranslationLocales(
                organization_id=organization_id, default_locale=default_locale, target_locales=target_locales
            )
            try:
                async with self.session.begin_nested():
                    self.session.add(row)
                    await self.session.flush()
                return row
            except IntegrityError:
                row = await self.locales(organization_id)
                assert row is not None
        row.default_locale = default_locale
        row.target_locales = target_locales
        row.updated_at = utcnow()
        await self.session.flush()
        return row
