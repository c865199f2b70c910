"""``herald worker`` runs below the API's CPU priority unless told otherwise.

Delivery is background work: when API and worker processes share a machine,
the API's answers come first (docs/deployment.md).
"""

from __future__ import annotations

import os

from tests.fixtures.processes import HeraldProcesses
from tests.processes.conftest import ProcessStore


async def test_a_worker_lowers_its_priority_by_ten_unless_told_otherwise(
    store: ProcessStore, herald: HeraldProcesses
) -> None:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    default = await herald.worker()
    chosen = await herald.worker(HERALD_WORKER_NICE="3")
    kept = await herald.worker(HERALD_WORKER_NICE="0")

    assert os.getpriority(os.PRIO_PROCESS, default.popen.pid) == min(19, own + 10)
    assert os.getpriority(os.PRIO_PROCESS, chosen.popen.pid) == min(19, own + 3)
    assert os.getpriority(os.PRIO_PROCESS, kept.popen.pid) == own
