"""Worker processes for the multi-process tests: ``python worker_app.py URL COUNTER``.

Serves the default queue until SIGTERM. Each executed step appends a line to
COUNTER, so the tests count executions across processes and kills.
"""

from __future__ import annotations

import asyncio
import os
import sys

import stalwart as sw

COUNTER = sys.argv[2] if len(sys.argv) > 2 else os.devnull
#: Seconds each of a job's steps takes (``STEP_PAUSE``): longer, to act mid-batch.
PAUSE = float(os.environ.get("STEP_PAUSE", "0.03"))


def _count(what: str) -> None:
    with open(COUNTER, "a") as f:
        f.write(what + "\n")


@sw.policy
async def step_a(i: int) -> int:
    _count(f"a:{i}")
    await asyncio.sleep(PAUSE)
    return i


@sw.policy
async def step_b(i: int) -> int:
    _count(f"b:{i}")
    await asyncio.sleep(PAUSE)
    return i * 10


@sw.policy
async def job(ctx: sw.Context, i: int) -> int:
    return await step_a(i) + await step_b(i)


@sw.policy
async def slow_job(ctx: sw.Context) -> str:
    _count("slow:start")
    await asyncio.sleep(60)
    return "finished"


@sw.policy
async def tick(i: int) -> int:
    _count(f"tick:{i}:{os.getpid()}")
    await asyncio.sleep(0.05)
    return i


@sw.policy
async def long_job(ctx: sw.Context, n: int) -> int:
    total = 0
    for i in range(n):
        total += await tick(i)
    return total


async def main() -> None:
    url = sys.argv[1]
    lease = float(os.environ.get("LEASE", "30"))
    runner = sw.Runner(
        url, lease=lease, poll_interval=0.05, concurrency=4, policies=[job, slow_job, long_job]
    )
    print("serving", flush=True)
    await runner.serve()


if __name__ == "__main__":
    asyncio.run(main())
