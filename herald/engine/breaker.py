"""The circuit breaker of provider failover: when to skip an integration, and when to try it again.

Every worker shares it through the ``integration_health`` table, so a
provider that is down is skipped by all of them after a few failures instead
of each worker finding out on its own, message after message.

- **Healthy**: no row. Every message may use the integration.
- **Failing**: transient failures (timeouts, refused connections, 5xx, 429)
  are counted within a window of ``window_seconds`` from the first of them;
  the integration still takes traffic.
- **Skipped** (open): ``failures`` of them within the window. Until
  ``skipped_until`` (``cooldown_seconds`` later) messages go to the channel's
  next integration without calling this one.
- **Half-open**: the cool-down is over. One message claims the probe (an
  atomic update: two workers never both probe) and sends through it; the
  others keep skipping it while the claim lasts (a cool-down long, so a probe
  whose worker died is retried). The probe's success closes the breaker (the
  row is deleted); its transient failure opens it for another cool-down.

Permanent failures (a 4xx, a refused address) say nothing about whether the
provider is up and are not counted. A success closes the breaker at any time.

The time comes from ``now()``, which tests replace to move the clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from herald.kit.time import isoformat, utcnow
from herald.models import IntegrationHealth


@dataclass(frozen=True)
class BreakerSettings:
    """``HERALD_BREAKER_FAILURES``, ``HERALD_BREAKER_WINDOW_SECONDS``, ``HERALD_BREAKER_COOLDOWN_SECONDS``."""

    failures: int = 5
    window_seconds: float = 60.0
    cooldown_seconds: float = 30.0

    @property
    def window(self) -> timedelta:
        return timedelta(seconds=self.window_seconds)

    @property
    def cooldown(self) -> timedelta:
        return timedelta(seconds=self.cooldown_seconds)


class Status(StrEnum):
    HEALTHY = "healthy"
    FAILING = "failing"
    SKIPPED = "skipped"
    HALF_OPEN = "half-open"


class Decision(StrEnum):
    """What a message does with an integration."""

    SEND = "send"
    SKIP = "skip"
    # Claim the probe of a half-open breaker, and send if the claim is ours.
    PROBE = "probe"


def now() -> datetime:
    return utcnow()


def status(health: IntegrationHealth | None, at: datetime) -> Status:
    if health is None or (health.failing_since is None and health.skipped_until is None):
        return Status.HEALTHY
    if health.skipped_until is None:
        return Status.FAILING
    if health.skipped_until > at:
        return Status.SKIPPED
    return Status.HALF_OPEN


def decide(health: IntegrationHealth | None, at: datetime) -> Decision:
    state = status(health, at)
    if state in (Status.HEALTHY, Status.FAILING):
        return Decision.SEND
    if state is Status.SKIPPED:
        return Decision.SKIP
    assert health is not None
    if health.probe_until is not None and health.probe_until > at:
        return Decision.SKIP  # another message is probing it
    return Decision.PROBE


def describe(health: IntegrationHealth | None, at: datetime) -> dict[str, object]:
    """The ``health`` object of the integration routes: status, failingSince, skippedUntil, consecutiveFailures."""
    state = status(health, at)
    if health is None or state is Status.HEALTHY:
        return {"status": Status.HEALTHY.value, "consecutiveFailures": 0}
    shown: dict[str, object] = {
        "status": state.value,
        "failingSince": isoformat(health.failing_since),
        "consecutiveFailures": health.consecutive_failures,
    }
    if health.skipped_until is not None:
        shown["skippedUntil"] = isoformat(health.skipped_until)
    if health.last_error:
        shown["lastError"] = health.last_error
    return {key: value for key, value in shown.items() if value is not None}
