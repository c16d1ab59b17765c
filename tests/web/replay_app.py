"""A run a SIGKILL stops inside a nested call, and a process that resumes it.

``nightly`` calls ``fetch`` (key 1), then ``batch`` (key 2), which calls
``fetch`` (2.1) and ``crunch`` (2.2). Run as ``python -m
tests.web.replay_app <store-url> crash`` it starts ``nightly`` and prints
``in crunch`` from inside ``crunch``, where a test kills it; with
``resume`` it recovers the run and finishes it: ``batch`` runs again from
its top, reading 1 and 2.1 from the ledger.
"""

from __future__ import annotations

import asyncio
import sys
import time

import stalwart as sw

RUN_ID = "nightly-1"
_MODE = {"crash": False}


@sw.policy
async def fetch(n: int) -> int:
    """Fetch item ``n``."""
    return n


@sw.policy
async def crunch(n: int) -> int:
    """Crunch ``n``: stuck for good while crashing, quick on resume."""
    if _MODE["crash"]:
        print("in crunch", flush=True)
        time.sleep(120)
    await asyncio.sleep(0.05)
    return n * 2


@sw.policy
async def batch(ctx: sw.Context, n: int) -> int:
    """Fetch ``n``, then crunch it."""
    got = await ctx.call(fetch, n=n)
    return got + await ctx.call(crunch, n=got)


@sw.policy
async def nightly(ctx: sw.Context) -> int:
    """One fetch, then one batch."""
    first = await ctx.call(fetch, n=1)
    return await ctx.call(batch, n=first)


POLICIES = [nightly, batch, fetch, crunch]


async def main(url: str, mode: str) -> None:
    _MODE["crash"] = mode == "crash"
    async with sw.Runner(url, policies=POLICIES) as r:
        if mode == "crash":
            await r.run(nightly, run_id=RUN_ID)
        else:
            await r.recover()
            print("result", await r.outcome(RUN_ID), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
