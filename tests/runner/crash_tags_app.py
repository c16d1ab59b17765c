"""A script that starts run "P" by id, tagged as its third argument says
(JSON, or "-" for no tags), and prints its result.

P records a step, then parks until the process is killed; after it, P spawns two
child runs. Run twice on one store: the first process is SIGKILLed in the
step, the second starts "P" again without tags and finishes it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import stalwart as sw

URL, MARKS, TAGS = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


@sw.policy
async def child(i: int) -> int:
    return i * 10


@sw.policy
async def parent(ctx: sw.Context) -> list[int]:
    await ctx.now()  # a recorded step before the kill
    mark = MARKS / "parked"
    if not mark.exists():  # the first process: killed here, before any child
        mark.touch()
        await asyncio.sleep(120)
    return list(await ctx.map(child, [1, 2]))


async def main() -> None:
    tags = None if TAGS == "-" else json.loads(TAGS)
    runner = sw.Runner(URL, lease=1.0, poll_interval=0.1, policies=[parent, child])
    async with runner:
        handle = await runner.start(parent, run_id="P", tags=tags)
        print("result", await asyncio.wait_for(handle.result(), 30), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
