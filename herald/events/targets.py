"""The workflows an API process's triggers name, kept so a batch of triggers need not read them.

Accepting a batch of triggers on PostgreSQL costs two round trips: the read of
the workflows (and tenants and topics) the batch names, and one statement
that writes its events and jobs (``EventRepository.record_many``). Under a
burst the batch's round trips, not its CPU, are what its callers wait for.
With the workflows kept here, a batch that names only known workflows (and no
tenant or topic) makes the write alone.

Nothing here is trusted. The write statement checks, in its own snapshot, that
every workflow taken from here is still as it was read (same row, same
``updated_at``, not deleted) and writes nothing when one is not; the batch is
then read afresh and written again (``events.service.record_triggers``). A
trigger is therefore never accepted against a workflow that had changed before
its events were written, as with the read.
"""

from __future__ import annotations

from collections.abc import Iterable

from herald.workflows.repository import TriggerTarget

# Entries kept per process; past it the oldest go. Triggers name few workflows.
MAX_ENTRIES = 1024


class TriggerTargets:
    """Trigger targets by (environment, trigger identifier), as the last read found them."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: dict[tuple[str, str], TriggerTarget] = {}
        self._max_entries = max_entries

    def get(self, environment_id: str, identifier: str) -> TriggerTarget | None:
        return self._entries.get((environment_id, identifier))

    def keep(self, environment_id: str, target: TriggerTarget) -> None:
        key = (environment_id, target.trigger_identifier)
        self._entries.pop(key, None)
        self._entries[key] = target
        while len(self._entries) > self._max_entries:
            del self._entries[next(iter(self._entries))]

    def forget(self, keys: Iterable[tuple[str, str]]) -> None:
        for key in keys:
            self._entries.pop(key, None)
