"""``Runner.signal(..., uid=)``: a send repeated with its uid (a retry after
a lost reply) is delivered once, on every store, even when the run has gone
on to wait for the same signal again."""

from __future__ import annotations

import asyncio

import stalwart as sw


@sw.policy
async def two_answers(ctx: sw.Context) -> list[str]:
    first = await ctx.wait_for("input")
    second = await ctx.wait_for("input")
    return [first, second]


async def _until_waiting(runner: sw.Runner, run_id: str, steps: int) -> None:
    """Until the run waits for its ``steps``-th signal (in memory: at once)."""
    for _ in range(400):
        rec = await runner.get_run(run_id)
        if runner.store.ephemeral or (
            rec.status == "suspended" and len(await runner.steps(run_id)) >= steps
        ):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id!r} never waited")


async def test_a_signal_sent_again_with_its_uid_answers_only_its_own_wait(
    any_store_url: str,
) -> None:
    async with sw.Runner(any_store_url, policies=[two_answers]) as runner:
        handle = await runner.start(two_answers, run_id="asked-twice")
        await _until_waiting(runner, "asked-twice", 0)
        await runner.signal("asked-twice", "input", "first", uid="answer-1")
        await _until_waiting(runner, "asked-twice", 2)
        await runner.signal("asked-twice", "input", "first", uid="answer-1")  # a retry
        await runner.signal("asked-twice", "input", "second", uid="answer-2")
        assert await handle.result(timeout=30) == ["first", "second"]


async def test_signals_without_a_uid_are_each_delivered(any_store_url: str) -> None:
    async with sw.Runner(any_store_url, policies=[two_answers]) as runner:
        handle = await runner.start(two_answers, run_id="asked-twice")
        await _until_waiting(runner, "asked-twice", 0)
        await runner.signal("asked-twice", "input", "same")
        await runner.signal("asked-twice", "input", "same")
        assert await handle.result(timeout=30) == ["same", "same"]
