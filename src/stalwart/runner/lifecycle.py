"""Opening and closing a runner: its store, its worker loop, its live runs.

Over a durable store an open runner keeps a worker loop in the background
(leases, wake-ups, the runs it must resume: S7, S8); in memory there is
none. Closing stops that loop first, then the runs executing here (their
leases run out and another process resumes them), then closes the store.
"""

from __future__ import annotations

import asyncio

from ..stores.base import Store
from .driver import Driver
from .table import RunTable
from .worker import Worker

__all__ = ["start_loop", "stop_executing"]


async def start_loop(store: Store, table: RunTable, worker: Worker) -> asyncio.Task[None] | None:
    """Open the store and, if it is durable, start the worker loop (its task)."""
    await store.open()
    if store.ephemeral:
        return None
    table.poke = asyncio.Event()
    return asyncio.create_task(worker.loop(), name="stalwart-runner")


async def stop_executing(loop: asyncio.Task[None] | None, table: RunTable, driver: Driver) -> None:
    """Stop the worker loop and every run executing here, and wait for them;
    then raise the bug that ended the loop, if one did (see :meth:`Worker.loop`)."""
    if loop is not None:
        loop.cancel()
        await asyncio.wait([loop])  # its own error is raised below, after the cleanup
        if not loop.cancelled():
            loop.exception()  # retrieved: it is table.failed, raised below
    for live in list(table.live.values()):
        if live.task is not None and not live.task.done():
            live.task.cancel()
            await asyncio.wait([live.task])  # neither raises nor swallows our own cancel
    await driver.drain()
    if table.failed is not None:
        failed, table.failed = table.failed, None  # raised once, by the close that saw it
        raise failed
