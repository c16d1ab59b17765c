"""Ticking, in one process with a clock the test moves: each tick makes one
run; ticks missed while no worker served follow the schedule's policy; a
schedule whose policy this worker lacks is logged once and left for a
worker that has it."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

import stalwart as sw
from stalwart.schedules import Timing, plan, tick_of, tick_run_id

from ._policies import RAN, other, report
from .test_define import T0, Clock


async def settled(r: sw.Runner, name: str, n: int) -> list[str]:
    """Wait until the schedule's runs number ``n`` and all finished; then a few
    more polls, so that an extra run would show. Their ids, oldest tick first."""
    deadline = time.monotonic() + 10
    while True:
        runs = [x for x in await r.list_runs(limit=1000) if x.id.startswith(f"{name}@")]
        if len(runs) >= n and all(x.status == "succeeded" for x in runs):
            break
        assert time.monotonic() < deadline, [(x.id, x.status) for x in runs]
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.15)
    runs = [x for x in await r.list_runs(limit=1000) if x.id.startswith(f"{name}@")]
    return sorted(x.id for x in runs)


def serving(url: str, clock: Clock, policies: Any = (report, other)) -> sw.Runner:
    return sw.Runner(url, serving=True, poll_interval=0.02, policies=list(policies))


async def test_each_tick_on_time_makes_one_run(store_url: str) -> None:
    RAN.clear()
    clock = Clock(T0 + 1)
    async with serving(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        await schedules.define(report, name="quarter", every=900, day="mon")
        await asyncio.sleep(0.1)
        assert await settled(r, "quarter", 0) == []  # nothing before the first tick
        clock.t = T0 + 900 + 2
        assert await settled(r, "quarter", 1) == [tick_run_id("quarter", T0 + 900)]
        clock.t = T0 + 1800 + 30
        ids = await settled(r, "quarter", 2)
        assert ids == [tick_run_id("quarter", T0 + 900), tick_run_id("quarter", T0 + 1800)]
        assert sorted(RAN) == ids  # each executed once
        assert await r.outcome(ids[0]) == "mon: 1 page(s)"
        s = await schedules.get("quarter")
        assert (s.last_at, s.next_at) == (T0 + 1800, T0 + 2700)
    assert tick_of(ids[1]) is not None and tick_of(ids[1])[0] == "quarter"
    assert tick_of(ids[1])[1].timestamp() == T0 + 1800
    assert tick_of("a-run-of-my-own") is None


@pytest.mark.parametrize("missed", ["once", "skip"])
async def test_ticks_missed_while_no_worker_served_follow_the_policy(
    store_url: str, missed: str
) -> None:
    RAN.clear()
    clock = Clock(T0 + 1)
    async with sw.Runner(store_url) as client:  # defines, never serves
        client_schedules = sw.Schedules(client, clock=clock)
        await client_schedules.define(report, name="hourly", every=3600, missed=missed, grace=120)
    # Every worker was down for five hours and ten minutes: five ticks missed.
    clock.t = T0 + 5 * 3600 + 600
    async with serving(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        if missed == "once":
            assert await settled(r, "hourly", 1) == [tick_run_id("hourly", T0 + 5 * 3600)]
        else:
            assert await settled(r, "hourly", 0) == []
        s = await schedules.get("hourly")
        assert s.next_at == T0 + 6 * 3600  # the next future tick
        # The next tick, on time, runs under either policy.
        clock.t = T0 + 6 * 3600 + 5
        ids = await settled(r, "hourly", 2 if missed == "once" else 1)
        assert ids[-1] == tick_run_id("hourly", T0 + 6 * 3600)
        assert sorted(RAN) == ids


async def test_a_tick_a_little_late_is_not_missed(store_url: str) -> None:
    clock = Clock(T0 + 1)
    async with sw.Runner(store_url) as client:
        client_schedules = sw.Schedules(client, clock=clock)
        await client_schedules.define(report, name="late", every=3600, missed="skip", grace=120)
    clock.t = T0 + 3600 + 100  # 100 s late, within grace: on time
    async with serving(store_url, clock) as r:
        sw.Schedules(r, clock=clock)  # ticks while it serves
        assert await settled(r, "late", 1) == [tick_run_id("late", T0 + 3600)]


async def test_a_policy_this_worker_lacks_is_logged_once_and_left(
    store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock(T0 + 1)
    async with sw.Runner(store_url) as client:
        client_schedules = sw.Schedules(client, clock=clock)
        await client_schedules.define(report, name="needs-report", every=60)
    clock.t = T0 + 61
    with caplog.at_level(logging.ERROR, logger="stalwart.runner"):
        async with serving(store_url, clock, policies=[other]) as r:
            schedules = sw.Schedules(r, clock=clock)
            await asyncio.sleep(0.3)  # many polls
            assert await r.list_runs() == []
            assert (await schedules.get("needs-report")).next_at == T0 + 60  # left due
    errors = [m for m in caplog.messages if "needs-report" in m]
    assert len(errors) == 1, errors
    assert "policy 'report' is not registered in this worker" in errors[0]
    # A worker that has it takes the tick.
    async with serving(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        assert await settled(r, "needs-report", 1) == [tick_run_id("needs-report", T0 + 60)]


async def test_a_paused_schedule_does_not_tick(store_url: str) -> None:
    clock = Clock(T0 + 1)
    async with serving(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        await schedules.define(report, name="p", every=60)
        await schedules.pause("p")
        clock.t = T0 + 3600
        assert await settled(r, "p", 0) == []
        await schedules.resume("p")
        clock.t = T0 + 3600 + 61
        assert await settled(r, "p", 1) == [tick_run_id("p", T0 + 3660)]


async def test_a_runner_that_does_not_serve_never_ticks(store_url: str) -> None:
    clock = Clock(T0 + 1)
    async with sw.Runner(store_url, poll_interval=0.02) as r:
        schedules = sw.Schedules(r, clock=clock)
        await schedules.define(report, name="idle", every=60)
        await r.run(other, run_id="busy")  # it executes its own runs, nothing else
        clock.t = T0 + 600
        await asyncio.sleep(0.2)
        assert [x.id for x in await r.list_runs()] == ["busy"]


def test_plan_for_cron_folds_missed_ticks_into_the_latest() -> None:
    timing = Timing.of("n", "0 2 * * *", None, "UTC")
    rec = sw.stores.base.ScheduleRecord(
        "n", "report", "{}", "0 2 * * *", None, "UTC", "once", 60.0, "default", 0, T0 + 7200
    )
    three_days_on = T0 + 3 * 86400 + 7200 + 30
    assert plan(rec, timing, three_days_on) == (
        T0 + 3 * 86400 + 7200,
        T0 + 3 * 86400 + 7200,
        T0 + 4 * 86400 + 7200,
    )
    rec.missed = "skip"
    assert plan(rec, timing, three_days_on)[1] == T0 + 3 * 86400 + 7200  # on time: runs
    assert plan(rec, timing, three_days_on + 3600)[1] is None  # an hour late: skipped
