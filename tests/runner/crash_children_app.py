"""A script that starts run "P" (two child runs) by id and prints its result.

Run twice on one SQLite file: the first process is SIGKILLed while the
children execute; the second is the user re-running the same script.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import stalwart as sw

URL, TIMEOUT, MARKS = sys.argv[1], float(sys.argv[2]), Path(sys.argv[3])


@sw.policy
async def slow_child(i: int) -> int:
    mark = MARKS / f"child{i}"
    if not mark.exists():  # the first process: parked here until it is killed
        mark.touch()
        await asyncio.sleep(120)
    return i * 10


@sw.policy
async def parent(ctx: sw.Context) -> list[int]:
    return list(await ctx.map(slow_child, [1, 2]))


async def main() -> None:
    # Every policy is given up front (S13): what is left to fail is the roles.
    runner = sw.Runner(URL, lease=2.0, poll_interval=0.1, policies=[parent, slow_child])
    async with runner:
        handle = await runner.start(parent, run_id="P")
        print("result", await asyncio.wait_for(handle.result(), TIMEOUT), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
