"""A worker process for the move tests: ``python move_app.py URL MARKS MODE``.

MODE ``start`` starts run "R" of ``chain`` and serves; ``serve`` only serves
(a worker of the other store). Every execution of a step appends a line to a
file in MARKS, so a test counts from outside what executed, and where.

``chain`` takes ``n`` steps with a durable sleep after each (a step boundary
the run suspends at, where a mover takes it), then fans out to two child
runs. Steps are slow on the source's worker, so the run is still there when
a mover starts.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import stalwart as sw

URL, MARKS, MODE = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def _mark(name: str, line: str) -> None:
    with open(MARKS / name, "a", encoding="utf-8") as f:
        f.write(f"{line} {os.getpid()} {MODE}\n")


@sw.policy
async def tick(i: int) -> int:
    _mark("ticks", str(i))
    if MODE == "start":
        await asyncio.sleep(0.25)  # slow here: the move starts long before the run ends
    return i


@sw.policy
async def child(i: int) -> int:
    _mark("children", str(i))
    return i * 10


@sw.policy
async def chain(ctx: sw.Context, n: int) -> int:
    total = 0
    for i in range(n):
        total += await ctx.call(tick, i)
        await ctx.sleep(0.05)
    total += sum(await ctx.map(child, [1, 2]))
    _mark("finished", str(total))
    return total


async def main() -> None:
    runner = sw.Runner(
        URL, lease=1.0, poll_interval=0.05, inline_sleep=0.0, policies=[chain, tick, child]
    )
    async with runner:
        if MODE == "start":
            await runner.start(chain, 40, run_id="R")
        print("serving", flush=True)
        await runner.serve()


if __name__ == "__main__":
    asyncio.run(main())
