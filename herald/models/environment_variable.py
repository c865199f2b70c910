from __future__ import annotations

from typing import Any

from sqlalchemy import Index, String, false
from sqlalchemy.orm import Mapped, mapped_column

from herald.models.base import ID, Base, IdMixin, TimestampMixin


class EnvironmentVariable(IdMixin, TimestampMixin, Base):
    """A variable of an organization with a value per environment (Novu's environment variables).

    Organization-wide as Novu's are: one key, one value for each environment
    that has one. ``values`` maps an environment's id to its value; a secret
    variable's values are kept sealed (herald.kit.crypto.SecretBox) and never
    leave the store in clear but to a step's render.
    """

    __tablename__ = "environment_variables"
    __table_args__ = (Index("uq_environment_variables_organization_key", "organization_id", "key", unique=True),)

    organization_id: Mapped[str] = mapped_column(ID)
    key: Mapped[str] = mapped_column(String(256))
    type: Mapped[str] = mapped_column(String(16), default="string")
    is_secret: Mapped[bool] = mapped_column(default=False, server_default=false())
    values: Mapped[dict[str, Any]] = mapped_column(default=dict)
