"""The custom step: run by its bridge in a code-first workflow, a passthrough of its controls otherwise.

In a workflow synced from a bridge (herald/bridge), the step's code ran on the
bridge when the step was executed (steps/bridged.py): its outputs are the
step's result, which the later steps read in their ``state``.

A custom step's logic is code in a bridge application (``@novu/framework``);
a workflow made through ``/v2/workflows`` has none, and Novu runs such a step
as a passthrough: its output is its controls (``controlValues.custom``, or all
of them). Herald does the same: the step completes with those controls as its
result, and an execution detail says so. Its controls are not templates and
call nothing.
"""

from __future__ import annotations

from herald.engine.steps.base import StepContext, StepOutcome


async def run(ctx: StepContext) -> StepOutcome:
    if ctx.bridge_outputs is not None:
        return StepOutcome.done("Custom step executed by the bridge", result=dict(ctx.bridge_outputs.outputs))
    controls = dict(ctx.step.get("controlValues") or {})
    output = controls.get("custom") if isinstance(controls.get("custom"), dict) else controls
    return StepOutcome.done(
        "Custom step: no bridge application runs its code here, so its controls are its output", result=dict(output)
    )
