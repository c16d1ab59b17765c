"""A fork that cannot be made as asked is refused before anything is written:
a step the run never recorded, or a new result of another shape than the
step recorded. Each error names the run and the step; the store gains no run.
"""

from __future__ import annotations

import pytest

import stalwart as sw
from stalwart.timetravel import ForkError, Replace, fork


@sw.policy
async def fetch(n: int) -> list[str]:
    return [f"page {n}"]


@sw.policy
async def pipeline(ctx: sw.Context, topic: str) -> str:
    a = await ctx.call(fetch, 1)
    b = await ctx.call(fetch, 2)
    return f"{topic}: {a[0]} + {b[0]}"


async def _ids(runner: sw.Runner) -> set[str]:
    return {r.id for r in await runner.store.list_runs(None, 100)}


@pytest.mark.parametrize("replace", [None, Replace(result=["edited"])], ids=["plain", "result"])
async def test_a_fork_at_a_step_the_run_never_recorded_is_refused(
    store_url: str, replace: Replace | None
) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="orig")
        with pytest.raises(ForkError) as caught:
            await fork(runner, "orig", at="99", new_run_id="orig-b", replace=replace)
        message = str(caught.value)
        assert "run 'orig' has no step '99'" in message
        assert "from '1' to '2'" in message and "are 1, 2" in message
        assert await _ids(runner) == {"orig"}  # nothing replayed, nothing written


async def test_a_fork_of_a_run_without_steps_says_so(store_url: str) -> None:
    @sw.policy
    async def bare(x: int) -> int:
        return x

    async with sw.Runner(store_url, policies=[bare]) as runner:
        await runner.run(bare, 1, run_id="bare-1")
        with pytest.raises(ForkError, match="run 'bare-1' has no step '1': it recorded no step"):
            await fork(runner, "bare-1", at="1")


async def test_a_new_result_of_another_shape_than_recorded_is_refused(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="orig")
        with pytest.raises(ForkError) as caught:
            await fork(runner, "orig", at="2", new_run_id="orig-b", replace=Replace(result="x"))
        message = str(caught.value)
        assert "run 'orig', step '2' (fetch)" in message
        assert "the new result is a string, but the step recorded a list of strings" in message
        assert 'e.g. ["page 2"]' in message  # the recorded value, as the example
        assert await _ids(runner) == {"orig"}
        # The recorded shape is accepted, and the fork runs from there.
        handle = await fork(
            runner, "orig", at="2", new_run_id="orig-c", replace=Replace(result=["new"])
        )
        assert await handle.result(timeout=20) == "t: page 1 + new"


async def test_a_fork_id_that_is_taken_or_invalid_is_a_fork_error(store_url: str) -> None:
    async with sw.Runner(store_url, policies=[pipeline]) as runner:
        await runner.run(pipeline, "t", run_id="orig")
        with pytest.raises(ForkError, match="run 'orig' exists"):
            await fork(runner, "orig", at="2", new_run_id="orig")
        with pytest.raises(ForkError, match="new_run_id"):
            await fork(runner, "orig", at="2", new_run_id="orig~x")
