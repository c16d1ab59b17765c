"""What enqueue is given for a run's timing is checked before anything is
stored: an endless delay would be a run no worker takes and a wake time no
reader can show; a priority past the store's column fails in the store as if
it were down."""

from __future__ import annotations

import math

import pytest

import stalwart as sw


@sw.policy
async def job(n: int) -> int:
    return n


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"delay": math.inf}, ValueError, "delay"),
        ({"delay": math.nan}, ValueError, "delay"),
        ({"delay": -1}, ValueError, "delay"),
        ({"delay": "soon"}, TypeError, "delay"),
        ({"priority": 2**40}, ValueError, "priority"),
        ({"priority": 1.5}, TypeError, "priority"),
    ],
)
async def test_bad_timing_is_refused_before_anything_is_stored(
    sqlite_url: str, kwargs: dict[str, object], error: type[Exception], says: str
) -> None:
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(error, match=says):
            await runner.enqueue(job, 1, run_id="r", **kwargs)  # type: ignore[arg-type]
        assert await runner.list_runs() == []


async def test_a_finite_delay_and_an_extreme_priority_are_kept(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        await runner.enqueue(job, 1, run_id="r", delay=60, priority=2**31 - 1)
        rec = await runner.get_run("r")
        assert rec.priority == 2**31 - 1 and rec.wake_at is not None


async def test_a_batch_with_bad_timing_is_refused_whole(sqlite_url: str) -> None:
    async with sw.Runner(sqlite_url) as runner:
        with pytest.raises(ValueError, match="delay"):
            await runner.enqueue_many([sw.RunCall(job, 1, run_id="a")], delay=math.inf)
        with pytest.raises(ValueError, match="priority"):
            await runner.enqueue_many([sw.RunCall(job, 1, run_id="a")], priority=-(2**40))
        assert await runner.list_runs() == []
