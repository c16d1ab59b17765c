"""B5's child: a 1,000-step durable run, killed by the parent, then recovered."""

from __future__ import annotations

import time

_t0 = time.perf_counter()

import asyncio  # noqa: E402
import sys  # noqa: E402

import stalwart as sw  # noqa: E402

_startup = time.perf_counter() - _t0
COUNTER = sys.argv[2]


@sw.policy
async def step(i: int) -> int:
    with open(COUNTER, "a") as f:
        f.write(f"{i}\n")
    return i


@sw.policy
async def long_run(ctx: sw.Context, n: int) -> int:
    total = 0
    for i in range(n):
        total += await step(i)
        print(f"done {i}", flush=True)
    return total


async def main() -> None:
    url, _, action, n = sys.argv[1:5]
    async with sw.Runner(url, policies=[long_run]) as runner:
        if action == "run":
            await runner.run(long_run, n=int(n), run_id="b5")
            return
        start = time.perf_counter()
        await runner.recover()
        result = await sw.RunHandle(runner, "b5").result()
        assert result == sum(range(int(n)))
        print(f"recovered_in {time.perf_counter() - start}")
        print(f"startup {_startup}")


if __name__ == "__main__":
    asyncio.run(main())
