"""Recurring schedules: rows a worker cannot tick must
not stop the schedules it can, a schedule must not be stored when its first
tick cannot even be written down, and the daylight-saving hour that repeats
must not send a missed tick back a day.

Each test ticks through a real serving runner on a real SQLite file (and on
PostgreSQL where the store's own rules are at stake), with a clock the test
moves.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import stalwart as sw
from stalwart import ScheduleError
from stalwart.schedules import DUE_BATCH, Timing, plan, tick_run_id
from stalwart.stores.base import ScheduleRecord

T0 = 1_799_971_200  # 2027-01-15 00:00 UTC: a multiple of 60, 3600 and 86400


class Clock:
    """What time it is for the schedules under test: set by the test."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@sw.policy
async def rows_mine(ctx: sw.Context) -> str:
    """The policy the serving worker has."""
    return ctx.run_id


@sw.policy
async def rows_theirs(ctx: sw.Context) -> str:
    """A policy only another application's workers have."""
    return ctx.run_id


async def runs_of(r: sw.Runner, name: str, want: int) -> list[str]:
    """The ids of the runs schedule ``name`` started, once there are ``want``
    of them (or the deadline passed: the caller's assert then shows what is)."""
    deadline = time.monotonic() + 5
    while True:
        ids = sorted(x.id for x in await r.list_runs(limit=5000) if x.id.startswith(f"{name}@"))
        if len(ids) >= want or time.monotonic() > deadline:
            return ids
        await asyncio.sleep(0.02)


def serving(url: str, clock: Clock, *policies: Any) -> sw.Runner:
    return sw.Runner(url, serving=True, poll_interval=0.02, policies=list(policies))


async def test_one_hand_edited_row_does_not_stop_every_other_schedule(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A schedule row edited by hand to hold text where a number belongs is
    that schedule's problem: logged once, naming it and the field; the other
    schedules of the store keep ticking."""
    path = tmp_path / "ledger.db"
    url = f"sqlite:///{path}"
    clock = Clock(T0 + 1)
    async with sw.Runner(url, policies=[rows_mine]) as client:
        client_schedules = sw.Schedules(client, clock=clock)
        await client_schedules.define(rows_mine, name="broken", every=60)
        await client_schedules.define(rows_mine, name="healthy", every=60)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE schedules SET grace = 'ten seconds' WHERE name = 'broken'")
    clock.t = T0 + 61
    with caplog.at_level(logging.ERROR, logger="stalwart"):
        async with serving(url, clock, rows_mine) as r:
            sw.Schedules(r, clock=clock)  # ticks while it serves
            assert await runs_of(r, "healthy", 1) == [tick_run_id("healthy", T0 + 60)]
            await asyncio.sleep(0.2)  # many polls
            assert await runs_of(r, "broken", 0) == []
    errors = [m for m in caplog.messages if "broken" in m]
    assert len(errors) == 1, errors
    assert "'grace'" in errors[0]


async def test_schedules_this_worker_cannot_tick_do_not_starve_the_ones_it_can(
    store_url: str,
) -> None:
    """More due schedules of another application's policy than one poll reads
    (their workers are down) must not hide this worker's own due schedule."""
    clock = Clock(T0 + 1)
    async with sw.Runner(store_url, policies=[rows_theirs]) as client:
        client_schedules = sw.Schedules(client, clock=clock)
        for i in range(DUE_BATCH + 5):
            await client_schedules.define(rows_theirs, name=f"a-theirs-{i:03}", every=60)
    async with sw.Runner(store_url, policies=[rows_mine]) as client:
        client_schedules = sw.Schedules(client, clock=clock)
        await client_schedules.define(rows_mine, name="z-mine", every=60)
    clock.t = T0 + 61
    async with serving(store_url, clock, rows_mine) as r:
        sw.Schedules(r, clock=clock)  # ticks while it serves
        assert await runs_of(r, "z-mine", 1) == [tick_run_id("z-mine", T0 + 60)]
        assert [x.id for x in await r.list_runs(limit=5000)] == [tick_run_id("z-mine", T0 + 60)]


async def test_an_interval_whose_first_tick_is_past_the_calendar_is_refused(
    sqlite_url: str,
) -> None:
    """``every=`` so long that the first tick falls after the year 9999 cannot
    have a tick run id or a date: refused by name, and nothing stored."""
    async with sw.Runner(sqlite_url, policies=[rows_mine]) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(ScheduleError, match=r"'far'.*every"):
            await schedules.define(rows_mine, name="far", every=10**12)
        assert await schedules.all() == []


def test_a_tick_missed_before_the_repeated_hour_is_not_read_as_the_day_before() -> None:
    """Paris, 25 October 2026: the clocks go back at 03:00 CEST, and 02:00 to
    03:00 happens twice. Workers were down since the 23rd; one comes back at
    02:10 CET (the second 02:10). The latest due tick of "30 2 * * *" is the
    2:30 CEST of that same night, not the one of the day before."""
    paris = ZoneInfo("Europe/Paris")
    timing = Timing.of("nightly", "30 2 * * *", None, "Europe/Paris")
    missed_since = int(datetime(2026, 10, 23, 2, 30, tzinfo=paris).timestamp())
    tonight = int(datetime(2026, 10, 25, 2, 30, tzinfo=paris).timestamp())  # CEST, fold=0
    now = int(datetime(2026, 10, 25, 2, 10, fold=1, tzinfo=paris).timestamp())
    assert tonight < now < tonight + 3600
    assert timing.latest(now, missed_since) == tonight
    s = ScheduleRecord(
        name="nightly",
        policy="p",
        inputs="{}",
        cron="30 2 * * *",
        every=None,
        timezone="Europe/Paris",
        missed="once",
        grace=60.0,
        queue="default",
        priority=0,
        next_at=missed_since,
    )
    latest, run_tick, upcoming = plan(s, timing, now)
    assert (latest, run_tick) == (tonight, tonight)
    assert upcoming == int(datetime(2026, 10, 26, 2, 30, tzinfo=paris).timestamp())
