"""The builders of records for tests that write a ledger directly: a step
record, and a run created and claimed in a store."""

from __future__ import annotations

import time

from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.stores.base import Store

__all__ = ["OTHER_HOST", "claimed_run", "step_record"]

# A worker on another host: this machine never judges it dead, only its lease counts.
OTHER_HOST = "elsewhere:1:a"


def step_record(
    key: str,
    output: str | None = "1",
    *,
    name: str = "p",
    args: str | None = "{}",
    args_hash: str = "h",
    error: str | None = None,
    attempts: int = 1,
    started_at: float | None = None,
    finished_at: float | None = None,
    kind: str = "call",
) -> StepRecord:
    """A finished step at ``key``: policy ``name``, its output (JSON text)
    or error. ``started_at`` is now unless given; ``finished_at`` is
    ``started_at`` unless given."""
    start = time.time() if started_at is None else started_at
    end = start if finished_at is None else finished_at
    return StepRecord(key, name, args_hash, args, output, error, attempts, start, end, kind)


async def claimed_run(
    store: Store,
    run_id: str,
    *,
    owner: str = OTHER_HOST,
    lease: float = 60.0,
    parent_id: str | None = None,
) -> int:
    """Create run ``run_id`` (policy ``p``, no inputs) in ``store`` and claim
    it for ``owner`` for ``lease`` seconds (a lease already run out when
    negative); the fence the claim holds."""
    await store.create_run(RunRecord(run_id, "p", "{}", parent_id=parent_id))
    claimed = await store.claim(run_id, owner, lease)
    assert claimed is not None, f"run {run_id!r} could not be claimed by {owner!r}"
    return claimed.fence
