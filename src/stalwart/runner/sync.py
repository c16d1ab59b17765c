"""Running a runner's work from synchronous code (a script), as ``run_sync`` does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


def run_blocking(work: Callable[[], Awaitable[T]], close: Callable[[], Awaitable[None]]) -> T:
    """``await work()`` in a new event loop, then ``await close()`` in it.

    Refused inside a running loop: ``asyncio.run`` would fail there with a
    message that does not say what to do instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_sync() cannot be called from a running event loop; use `await runner.run(...)`"
        )

    async def main() -> T:
        try:
            return await work()
        finally:
            await close()

    return asyncio.run(main())
