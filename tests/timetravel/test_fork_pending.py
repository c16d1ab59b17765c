"""A fork left for a worker (``fork_pending``): written pending, executed by
a worker serving its queue and never by the process that made it; one that
would call a step again with new arguments is refused before anything is
written."""

from __future__ import annotations

import asyncio

import pytest

import stalwart as sw
from stalwart.timetravel import ForkError, Replace, fork_pending

CALLS: list[int] = []


@sw.policy
async def fetch(n: int) -> int:
    CALLS.append(n)
    return n * 10


@sw.policy
async def total(ctx: sw.Context, a: int, b: int) -> int:
    return await ctx.call(fetch, a) + await ctx.call(fetch, b)


async def test_a_pending_fork_waits_for_a_worker_and_replays_its_prefix(store_url: str) -> None:
    CALLS.clear()
    async with sw.Runner(store_url, policies=[total]) as runner:
        await runner.run(total, 1, 2, run_id="orig")
    async with sw.Runner(store_url) as maker:  # holds no policy: it executes nothing
        new = await fork_pending(
            maker, "orig", at="2", new_run_id="orig-b", replace=Replace(result=7), policy=total
        )
        assert new == "orig-b"
        await asyncio.sleep(0.2)
        forked = await maker.get_run("orig-b")
        assert forked is not None and forked.status == "pending"
    stop = asyncio.Event()
    worker = sw.Runner(store_url, policies=[total], poll_interval=0.05)
    serving = asyncio.create_task(worker.serve(stop))
    try:
        async with asyncio.timeout(20):
            while (run := await worker.get_run("orig-b")) is None or run.status != "succeeded":
                await asyncio.sleep(0.03)
    finally:
        stop.set()
        await serving
    assert run.result == "17"
    assert CALLS == [1, 2]  # the original's two calls; the fork replayed step 1


async def test_a_pending_fork_does_not_call_a_step_again(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[total]) as runner:
        await runner.run(total, 1, 2, run_id="orig")
        with pytest.raises(ForkError, match="cannot call step '1' again with new arguments"):
            await fork_pending(runner, "orig", at="1", replace=Replace(args={"n": 5}))
        assert {r.id for r in await runner.store.list_runs(None, 10)} == {"orig"}
