"""The one builder of step records for tests that write a ledger directly."""

from __future__ import annotations

import time

from stalwart.core.ledger import StepRecord

__all__ = ["step_record"]


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
