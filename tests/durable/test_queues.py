"""Queues, workers, child runs: the distributed features, on every store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import stalwart as sw

SEEN: list[Any] = []
ACTIVE = {"now": 0, "max": 0}


@pytest.fixture(autouse=True)
def _reset() -> None:
    SEEN.clear()
    ACTIVE.update(now=0, max=0)


@sw.policy
async def square(x: int) -> int:
    SEEN.append(x)
    return x * x


@sw.policy
async def fails_on_3(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    return x


@sw.policy
async def busy(x: int) -> int:
    ACTIVE["now"] += 1
    ACTIVE["max"] = max(ACTIVE["max"], ACTIVE["now"])
    await asyncio.sleep(0.05)
    ACTIVE["now"] -= 1
    return x


@sw.policy
async def fan(ctx: sw.Context, n: int) -> int:
    return sum(await ctx.map(square, range(n)))


@sw.policy
async def fan_fails(ctx: sw.Context) -> str:
    try:
        await ctx.map(fails_on_3, range(5))
    except ValueError as exc:
        return f"caught: {exc}"
    return "no error"


@sw.policy
async def one_child(ctx: sw.Context, x: int) -> int:
    child = await ctx.spawn(square, x)
    assert child.run_id.startswith(f"{ctx.run_id}~")  # the child namespace
    return await child.result() + 1


@sw.policy
async def wave(ctx: sw.Context, n: int, keep_errors: bool = True) -> list[Any]:
    children = await ctx.spawn_many(fails_on_3, [((i,), {}) for i in range(n)])
    got = await ctx.results(children, return_exceptions=keep_errors)
    return [g if isinstance(g, int) else f"{type(g).__name__}: {g}" for g in got]


@sw.policy
async def separate_spawns(ctx: sw.Context, n: int) -> int:
    children = [await ctx.spawn(busy, i) for i in range(n)]  # a step (a group) each
    return sum(await ctx.results(children))


POLICIES = [square, fails_on_3, busy, fan, fan_fails, one_child, wave, separate_spawns]


async def test_map_spreads_items_as_child_runs(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        assert await runner.run(fan, n=20, run_id="fan") == sum(i * i for i in range(20))
        children = [r for r in await runner.list_runs(limit=100) if r.parent_id == "fan"]
        assert len(children) == 20 and all(r.status == "succeeded" for r in children)
        assert await runner.run(fan_fails, run_id="ff") == "caught: three is bad"
        assert await runner.run(one_child, x=4, run_id="oc") == 17
    assert sorted(SEEN) == sorted([*range(20), 4])  # every item ran exactly once


async def test_children_started_and_awaited_together_take_a_step_each(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=POLICIES) as runner:
        got = await runner.run(wave, 5, run_id="w")
        assert got == [0, 1, 2, "ValueError: three is bad", 4]  # an error in its place
        assert [s.key for s in await runner.steps("w")] == ["1", "2"]  # spawn, results
        children = [r for r in await runner.list_runs(limit=100) if r.parent_id == "w"]
        assert len(children) == 5
        with pytest.raises(ValueError, match="three is bad"):
            await runner.run(wave, 5, False, run_id="w-raises")
        # Children of several steps: waited for one group after another.
        assert await runner.run(separate_spawns, 4, run_id="s") == 0 + 1 + 2 + 3


async def test_map_in_memory() -> None:
    runner = sw.Runner()
    assert await runner.run(fan, n=5) == 30
    assert await runner.run(fan_fails) == "caught: three is bad"
    assert await runner.run(one_child, x=2) == 5
    assert await runner.run(wave, 4) == [0, 1, 2, "ValueError: three is bad"]
    assert await runner.run(separate_spawns, 3) == 3


async def test_enqueued_runs_wait_for_a_worker(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        handle = await client.enqueue(square, 7, run_id="q1", queue="math")
        await asyncio.sleep(0.2)
        assert (await client.get_run("q1")).status == "pending"  # no worker yet
        async with sw.Runner(
            store_url, serving=True, queues=["other"], poll_interval=0.05
        ) as wrong:
            await asyncio.sleep(0.2)
            assert (await wrong.get_run("q1")).status == "pending"
        async with sw.Runner(
            store_url, serving=True, queues=["math"], poll_interval=0.05, policies=POLICIES
        ):
            assert await handle.result(timeout=10) == 49


async def test_priorities_and_delayed_start(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        for i in range(5):
            await client.enqueue(square, i, run_id=f"p{i}", priority=i)
        delayed = await client.enqueue(square, 100, run_id="late", delay=0.6)
    start = time.monotonic()
    async with sw.Runner(
        store_url, serving=True, concurrency=1, poll_interval=0.05, policies=POLICIES
    ) as w:
        # Handles are awaited through a runner that is open: the client's is closed.
        assert await sw.RunHandle(w, delayed.run_id).result(timeout=10) == 10_000
        assert time.monotonic() - start >= 0.5
    assert SEEN[:5] == [4, 3, 2, 1, 0]  # highest priority first


async def test_worker_and_queue_concurrency_limits(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        handles = [await client.enqueue(busy, i, run_id=f"b{i}") for i in range(8)]
        await client.set_queue("default", concurrency=2)
    async with sw.Runner(store_url, serving=True, poll_interval=0.02, policies=POLICIES) as w:
        results = [await sw.RunHandle(w, h.run_id).result(timeout=20) for h in handles]
        assert results == list(range(8))
    assert ACTIVE["max"] == 2


async def test_queue_rate_limit(store_url: str) -> None:
    async with sw.Runner(store_url, serving=False) as client:
        await client.set_queue("slow", rate=10)
        handles = [await client.enqueue(square, i, run_id=f"r{i}", queue="slow") for i in range(6)]
    start = time.monotonic()
    async with sw.Runner(store_url, serving=True, poll_interval=0.02, policies=POLICIES) as w:
        for h in handles:
            await sw.RunHandle(w, h.run_id).result(timeout=20)
    # A burst of 10 tokens at most, then 10 a second: six runs fit in the burst,
    # so what is asserted is that limits do not block a run forever.
    assert time.monotonic() - start < 5


async def test_graceful_shutdown_hands_back_what_is_held(store_url: str) -> None:
    started = asyncio.Event()

    @sw.policy
    async def slow(ctx: sw.Context) -> str:
        started.set()
        await asyncio.sleep(5)
        return "done"

    stop = asyncio.Event()
    worker = sw.Runner(store_url, poll_interval=0.02, shutdown_timeout=0.1, policies=[slow])
    serving = asyncio.create_task(worker.serve(stop))
    async with sw.Runner(store_url, serving=False) as client:
        await client.enqueue(slow, run_id="held")
        await asyncio.wait_for(started.wait(), 10)
        stop.set()
        await asyncio.wait_for(serving, 10)
        rec = await client.get_run("held")
        assert rec.status == "pending" and rec.owner is None  # another worker may take it


async def test_enqueue_needs_a_store() -> None:
    with pytest.raises(sw.StoreError, match="durable store"):
        await sw.Runner().enqueue(square, 1)
