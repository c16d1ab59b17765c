"""A program that starts a wave of child runs (``ctx.spawn_many``) and, with
``kill``, SIGKILLs itself after the children are in the store but before
the parent's spawn step is recorded; ``recover`` resumes the parent.

    python wave_crash_app.py STORE_URL COUNTER kill|recover RUN_ID N

Each child execution appends a line to COUNTER.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

import stalwart as sw

COUNTER = ""


@sw.policy
async def cube(i: int) -> int:
    with open(COUNTER, "a") as f:
        f.write(f"cube:{i}\n")
    return i**3


@sw.policy
async def wave(ctx: sw.Context, n: int) -> int:
    children = await ctx.spawn_many(cube, [((i,), {}) for i in range(n)])
    return sum(await ctx.results(children))


async def main() -> None:
    global COUNTER
    url, COUNTER, action, run_id, n = sys.argv[1:6]
    runner = sw.Runner(url, poll_interval=0.05, policies=[cube, wave], serving=action != "kill")
    async with runner:
        if action == "kill":
            store: Any = runner.store
            record_step = store.record_step

            async def dies_at_the_spawn_record(run: str, fence: int, step: Any) -> Any:
                if step.name.startswith("stalwart.spawn:"):
                    print("children started", flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                return await record_step(run, fence, step)

            store.record_step = dies_at_the_spawn_record
            handle = await runner.start(wave, n=int(n), run_id=run_id)
        else:
            await runner.recover()
            handle = sw.RunHandle(runner, run_id)
        print("result " + json.dumps(await handle.result(timeout=60)), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
