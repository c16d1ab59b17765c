"""A program the crash tests run in real child processes and kill with SIGKILL.

Each executed step appends its key to a counter file (outside the process), so
the tests can count executions across crashes. After a step is recorded the
program prints ``done <key>`` so the parent knows how far it got.

    python crash_app.py STORE_URL COUNTER MODE run|recover RUN_ID [N]
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys

import stalwart as sw

COUNTER = ""


def _count(what: str) -> None:
    with open(COUNTER, "a") as f:
        f.write(what + "\n")
        f.flush()


@sw.policy
async def square(i: int) -> int:
    _count(f"square:{i}")
    await asyncio.sleep(0.01)  # in flight long enough for a kill to land mid-step
    return i * i


@sw.policy
async def slow_square(i: int, delay: float) -> int:
    _count(f"slow:{i}")
    await asyncio.sleep(delay)
    return i * i


@sw.policy
async def sequential(ctx: sw.Context, n: int) -> int:
    total = 0
    for i in range(n):
        total += await square(i)
        print(f"done {i}", flush=True)
    return total


@sw.policy
async def fanout(ctx: sw.Context, n: int) -> int:
    rng = random.Random(7)
    delays = [rng.uniform(0.0, 0.2) for _ in range(n)]

    async def one(i: int) -> int:
        v = await slow_square(i, delays[i])
        print(f"done {i}", flush=True)
        return v

    results = await asyncio.gather(*(one(i) for i in range(n)))
    return sum(results)


@sw.policy
async def sleeper(ctx: sw.Context, n: int) -> int:
    a = await square(1)
    print("done before-sleep", flush=True)
    await ctx.sleep(1.5)
    b = await square(2)
    return a + b + n


@sw.policy
async def waiter(ctx: sw.Context, n: int) -> int:
    a = await square(1)
    print("done before-wait", flush=True)
    got = await ctx.wait_for("go")
    b = await square(int(got["k"]))
    return a + b + n


POLICIES = {"sequential": sequential, "fanout": fanout, "sleeper": sleeper, "waiter": waiter}


async def main() -> None:
    global COUNTER
    url, COUNTER, mode, action, run_id = sys.argv[1:6]
    n = int(sys.argv[6]) if len(sys.argv) > 6 else 20
    pol = POLICIES[mode]
    # A process started to recover is a worker: it also resumes, when they
    # wake, the runs a dead process left sleeping or waiting.
    runner = sw.Runner(
        url,
        inline_sleep=0.05,
        poll_interval=0.05,
        policies=list(POLICIES.values()),
        serving=action != "run",
    )
    async with runner:
        if action == "run":
            handle = await runner.start(pol, n=n, run_id=run_id)
        else:
            handles = await runner.recover()
            print(f"recovered {len(handles)}", flush=True)
            handle = sw.RunHandle(runner, run_id)
        result = await handle.result(timeout=60)
        print("result " + json.dumps(result), flush=True)
        print(f"pid {os.getpid()}", flush=True)


if __name__ == "__main__":
    asyncio.run(main())
