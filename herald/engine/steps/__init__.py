"""One module per step kind; ``STEP_RUNNERS`` maps a step type to its ``run`` function."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from herald.engine.steps import chat, custom, delay, digest, email, http_request, in_app, push, sms, throttle
from herald.engine.steps.base import StepContext, StepOutcome

StepRunner = Callable[[StepContext], Awaitable[StepOutcome]]

STEP_RUNNERS: dict[str, StepRunner] = {
    "in_app": in_app.run,
    "email": email.run,
    "sms": sms.run,
    "chat": chat.run,
    "push": push.run,
    "delay": delay.run,
    "digest": digest.run,
    "throttle": throttle.run,
    "http_request": http_request.run,
    "custom": custom.run,
}
