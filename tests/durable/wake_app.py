"""A worker for the wake-up tests: ``python wake_app.py URL``.

Serves every queue with a poll every 30 s, so that only a wake-up from the
store can explain a run that starts within seconds. Prints "serving" once
its loop runs, then serves until SIGTERM.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import stalwart as sw

POLL = 30.0


@sw.policy
async def started(ctx: sw.Context) -> float:
    """When the run began executing (enqueue -> first step)."""
    return await ctx.now()


@sw.policy
async def wait_go(ctx: sw.Context) -> dict[str, Any]:
    """Waits for the signal "go"; returns it and when the run resumed."""
    got = await ctx.wait_for("go")
    return {"got": got, "at": await ctx.now()}


POLICIES = [started, wait_go]


async def main(url: str) -> None:
    runner = sw.Runner(url, policies=POLICIES, poll_interval=POLL, lease=60)
    serving = asyncio.create_task(runner.serve())
    await asyncio.sleep(0.3)  # its loop has run once and listens
    print("serving", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
