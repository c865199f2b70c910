"""Sealing credential secrets stored in the clear, run by ``herald migrate`` after the schema.

A field that became a secret after values were stored (``webhookUrl``, of
integrations and of subscriber channels; an integration's
``configurations.inboundWebhookSigningKey``) is in the clear in those rows.
They keep working (``SecretBox.open`` passes an unsealed value through) and
answers mask them, but the store should not hold them readable: this pass
seals them. It is not an Alembic revision because it needs
``HERALD_SECRET_KEY``, which the schema history must not depend on (a
revision is applied once, by whichever process gets there, key or not);
``herald migrate`` always has the key. Sealing skips sealed values, so the
pass is idempotent and cheap to repeat: integrations are few, and only the
subscribers whose channels name a ``webhookUrl`` are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, cast, select, update

from herald.kit.crypto import SecretBox
from herald.kit.db import create_engine, create_sessionmaker
from herald.models import Integration, Subscriber

BATCH = 500


@dataclass
class Sealed:
    integrations: int = 0
    subscribers: int = 0


def _sealed_channels(box: SecretBox, channels: list[Any]) -> list[Any]:
    return [
        {**entry, "credentials": box.seal_credentials(entry["credentials"])}
        if isinstance(entry, dict) and isinstance(entry.get("credentials"), dict)
        else entry
        for entry in channels
    ]


async def seal_plaintext_secrets(database_url: str, box: SecretBox) -> Sealed:
    """Seal every secret credential stored in the clear; answers how many rows changed."""
    engine = create_engine(database_url, pool_size=1)
    sealed = Sealed()
    try:
        maker = create_sessionmaker(engine)
        async with maker() as session, session.begin():
            rows = (
                await session.execute(select(Integration.id, Integration.credentials, Integration.configurations))
            ).all()
            for integration_id, credentials, configurations in rows:
                changed: dict[str, Any] = {}
                new = box.seal_credentials(credentials)
                if new != (credentials or {}):
                    changed["credentials"] = new
                new_configurations = box.seal_configurations(configurations)
                if new_configurations != configurations:
                    changed["configurations"] = new_configurations
                if changed:
                    await session.execute(update(Integration).where(Integration.id == integration_id).values(**changed))
                    sealed.integrations += 1
        after = ""
        while True:
            async with maker() as session, session.begin():
                rows = (
                    await session.execute(
                        select(Subscriber.id, Subscriber.channels)
                        .where(Subscriber.id > after, cast(Subscriber.channels, String).like("%webhookUrl%"))
                        .order_by(Subscriber.id)
                        .limit(BATCH)
                    )
                ).all()
                for subscriber_id, channels in rows:
                    new = _sealed_channels(box, channels or [])
                    if new != (channels or []):
                        await session.execute(update(Subscriber).where(Subscriber.id == subscriber_id).values(channels=new))
                        sealed.subscribers += 1
            if len(rows) < BATCH:
                break
            after = rows[-1][0]
    finally:
        await engine.dispose()
    return sealed
