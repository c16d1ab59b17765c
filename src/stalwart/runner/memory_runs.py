"""What a runner does for runs of the memory store that a durable run never needs.

In memory a run lives only for its caller: ``run()`` cancelled stops it (no
other process could resume it), and a run nobody can address (``run()``
without an id) is forgotten once it has finished, so a process calling
``run()`` in a loop does not keep every result.
"""

from __future__ import annotations

import asyncio

from ..stores.base import Store
from .table import RunTable

__all__ = ["forget_run", "stop_with_caller"]


async def stop_with_caller(table: RunTable, run_id: str) -> None:
    """Stop the run executing here, and let it settle (its option calls cancelled)."""
    live = table.live.get(run_id)
    if live is not None and live.task is not None:
        live.cancel_requested = True
        live.task.cancel()
        await asyncio.wait([live.task])


def forget_run(store: Store, table: RunTable, run_id: str) -> None:
    """Drop a finished run and its children from the store and from ``table``."""
    forget = getattr(store, "forget", None)
    gone = forget(run_id) if forget is not None else [run_id]
    for rid in gone:
        table.kept.pop(rid, None)
        table.calls.pop(rid, None)
        table.mine.discard(rid)
