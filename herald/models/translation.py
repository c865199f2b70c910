from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Index, String
from sqlalchemy.orm import Mapped, mapped_column

from herald.kit.time import utcnow
from herald.models.base import ID, Base, EnvironmentScopedMixin, IdMixin, TimestampMixin


class Translation(IdMixin, EnvironmentScopedMixin, TimestampMixin, Base):
    """One locale's keys for one resource (a workflow, or a layout), as Novu's translations.

    A translation is found by its stable key ``(resource_type, resource_id, locale)``
    within its environment: ``resource_id`` is the workflow's identifier (Novu's
    workflowId), not the row id, so the same key names the same workflow's keys in
    every environment (environment promotion copies them by it). ``content`` is the
    JSON object as given (nested objects, or flat keys with dots, or both).
    """

    __tablename__ = "translations"
    __table_args__ = (
        Index(
            "uq_translations_environment_resource_locale",
            "environment_id",
            "resource_type",
            "resource_id",
            "locale",
            unique=True,
        ),
    )

    resource_type: Mapped[str] = mapped_column(String(16))
    resource_id: Mapped[str] = mapped_column(String(300))
    locale: Mapped[str] = mapped_column(String(16))
    content: Mapped[dict[str, Any]] = mapped_column(default=dict)


class TranslationLocales(Base):
    """An organization's default and target locales (Novu keeps them on the organization).

    No row means the default locale ``en_US`` and no target locales.
    """

    __tablename__ = "translation_locales"

    organization_id: Mapped[str] = mapped_column(ID, primary_key=True)
    default_locale: Mapped[str] = mapped_column(String(16))
    target_locales: Mapped[list[Any]] = mapped_column(default=list)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
