"""One module per step kind; ``STEP_RUNNERS`` maps a step type to its ``run`` function."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from herald.engine.steps import delay, digest, in_app
from herald.engine.steps.base import StepContext, StepOutcome

StepRunner = Callable[[StepContext], Awaitable[StepOutcome]]

STEP_RUNNERS: dict[str, StepRunner] = {
    "in_app": in_app.run,
    "delay": delay.run,
    "digest": digest.run,
}
