"""``Runner.signal(wait_fence=)`` end to end: the fence a sender read of a
suspended run answers that wait only, through a real runner resuming the
run (a claim each time), on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest

import stalwart as sw


@sw.policy
async def asks_twice(ctx: sw.Context) -> list[str]:
    first = await ctx.wait_for("answer")
    second = await ctx.wait_for("answer")
    return [first, second]


@sw.policy
async def asks_with_a_deadline(ctx: sw.Context) -> str:
    try:
        return str(await ctx.wait_for("answer", timeout=0.3))
    except TimeoutError:
        return "timed out"


async def suspended(runner: sw.Runner, run_id: str, after: int = -1) -> int:
    """The fence of the run's open wait, once it waits with a fence past ``after``."""
    for _ in range(400):
        rec = await runner.store.get_run(run_id)
        if rec is not None and rec.status == "suspended" and rec.fence > after:
            return rec.fence
        await asyncio.sleep(0.025)
    raise AssertionError(f"run {run_id!r} never waited")


async def test_an_answer_for_a_wait_already_answered_is_refused_by_the_next(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=[asks_twice]) as runner:
        handle = await runner.start(asks_twice, run_id="a")
        first = await suspended(runner, "a")
        await runner.signal("a", "answer", "one", wait_fence=first)
        with pytest.raises(sw.SignalRefused):  # two clients answered the first wait
            await runner.signal("a", "answer", "late", wait_fence=first)
        second = await suspended(runner, "a", after=first)
        with pytest.raises(sw.SignalRefused):  # the first wait's fence is stale now
            await runner.signal("a", "answer", "late again", wait_fence=first)
        await runner.signal("a", "answer", "two", wait_fence=second)
        assert await handle.result(timeout=30) == ["one", "two"]


async def test_a_wait_that_timed_out_refuses_its_late_answer(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=[asks_with_a_deadline]) as runner:
        handle = await runner.start(asks_with_a_deadline, run_id="t")
        fence = await suspended(runner, "t")
        assert await handle.result(timeout=30) == "timed out"
        with pytest.raises((sw.SignalRefused, sw.StoreError)):  # finished: takes nothing
            await runner.signal("t", "answer", "late", wait_fence=fence)


async def test_a_cancelled_wait_takes_no_answer(store_url: str) -> None:
    async with sw.Runner(store_url, poll_interval=0.05, policies=[asks_twice]) as runner:
        await runner.start(asks_twice, run_id="c")
        fence = await suspended(runner, "c")
        await runner.cancel("c")
        with pytest.raises((sw.SignalRefused, sw.StoreError)):
            await runner.signal("c", "answer", "too late", wait_fence=fence)
        rec = await runner.store.get_run("c")
        assert rec is not None and rec.status == "cancelled"
