"""Acting on runs by id: signals, cancellation, retention.

None of these executes a run here (a process that only signals or cancels
stays a client); they change what the store says and wake whoever executes
the run: its own runner, or a worker within a heartbeat (S9).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..core import codec
from ..core.errors import CancelledRun, RunNotFound
from ..stores.base import Store
from .table import RunTable

__all__ = ["cancel_run", "prune_runs", "send_signal"]


async def send_signal(store: Store, table: RunTable, run_id: str, name: str, payload: Any) -> None:
    """Queue ``payload`` for the run's ``wait_for(name)``; in memory, hand it
    to the live run (waits there are inline)."""
    if store.ephemeral:
        live = table.live.get(run_id)
        if live is None:
            raise RunNotFound(f"no live run {run_id!r} in this runner")
        live.execution.deliver(name, payload)
        return
    await store.send_signal(run_id, name, codec.dumps(payload, f"signal {name!r}"))
    table.wake_worker()


async def cancel_run(store: Store, table: RunTable, run_id: str) -> None:
    """Ask the store to cancel the run, and stop it now if it executes here."""
    live = table.live.get(run_id)
    rec = await store.request_cancel(run_id)
    if rec is None:
        raise RunNotFound(f"no run {run_id!r}")
    if store.ephemeral and rec.status == "cancelled" and live is None:
        table.kept.setdefault(run_id, ("cancelled", CancelledRun(f"run {run_id!r} was cancelled")))
    watcher = table.watchers.get(run_id)
    if watcher is not None:
        watcher.set()
    if live is not None and live.task is not None:
        live.cancel_requested = True
        live.task.cancel()
        await asyncio.shield(live.done)  # set once the run has settled, never raises


async def prune_runs(
    store: Store, table: RunTable, older_than: float | None, keep: int | None
) -> int:
    """Delete finished runs (S12), and the outcomes this process kept of them."""
    cutoff = None if older_than is None else time.time() - older_than
    if cutoff is None and keep is None and store.ephemeral:
        cutoff = time.time() + 1  # in memory, every finished run
    gone = await store.prune(cutoff, keep)
    if table.kept:
        present = {r.id for r in await store.get_runs(list(table.kept))}
        for run_id in [i for i in table.kept if i not in present]:
            del table.kept[run_id]
            table.calls.pop(run_id, None)
    return gone
