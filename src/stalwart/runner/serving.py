"""Serving: a runner working as a worker until told to stop (``stalwart worker``).

A worker stops on ``stop`` or on SIGTERM/SIGINT: it stops claiming, gives
the runs it holds ``shutdown_timeout`` seconds to finish, and hands the rest
back to the store for another worker (S8).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

from .worker import Worker

__all__ = ["serve"]


async def serve(
    worker: Worker,
    stop: asyncio.Event | None,
    shutdown_timeout: float,
    *,
    open_runner: Callable[[], Awaitable[None]],
    close_runner: Callable[[], Awaitable[None]],
) -> None:
    """Open the runner, work until ``stop`` is set or a signal arrives, close it."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
            installed.append(sig)
        except (RuntimeError, ValueError, NotImplementedError):
            pass  # not the main thread: the caller sets ``stop``
    try:
        await open_runner()
        await worker.serve(stop, shutdown_timeout)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await close_runner()
        worker.draining = False
