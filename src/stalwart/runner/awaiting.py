"""Awaiting a run's outcome, wherever it executes.

A run executing here settles a future; one executing elsewhere (another
worker, a later process) is read from the store, at first often and then
every ``poll_interval``, woken early when this process learns something: a
cancel it sent, or the store's word that a run settled elsewhere (the worker
loop then reads every awaited run in one query and wakes those that
finished). A store that is down is waited out (S14), never raised to the
caller as if the run had failed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import RunNotFound, StoreUnavailable
from ..core.ledger import TERMINAL, RunRecord
from ..core.recorded import recorded_outcome
from .registry import Registry
from .table import RunTable

__all__ = ["await_outcome"]


async def await_outcome(
    run_id: str,
    table: RunTable,
    registry: Registry,
    get_run: Callable[[str], Awaitable[RunRecord]],
    *,
    ephemeral: bool,
    poll_interval: float,
) -> Any:
    """The run's result, or its error raised, waiting as long as needed."""
    delay = 0.01
    try:
        while True:
            # Watched before the store is read: word that the run settled,
            # arriving while we read, then ends the wait below at once.
            watcher = table.watchers.setdefault(run_id, asyncio.Event())
            watcher.clear()
            if table.watching is None:
                table.wake_worker()  # the loop starts taking the store's wake-ups
            live = table.live.get(run_id)
            if live is not None:
                status, value = await asyncio.shield(live.done)
                if status == "succeeded":
                    return value
                if status in ("failed", "cancelled"):
                    raise value
            kept = table.kept.get(run_id)
            if kept is not None:
                if kept[0] == "succeeded":
                    return kept[1]
                raise kept[1]
            try:
                rec: RunRecord | None = await get_run(run_id)
            except StoreUnavailable:
                rec = None  # down for now: look again after the delay
            if rec is not None and rec.status in TERMINAL:
                registry.declare_for(rec)
                return recorded_outcome(run_id, rec.status, rec.result, rec.error)
            if rec is not None and ephemeral:
                raise RunNotFound(f"run {run_id!r} is {rec.status} and not executing here")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await watcher.wait()
            delay = min(delay * 2, poll_interval)
    finally:
        table.watchers.pop(run_id, None)  # no Event left behind per awaited run
