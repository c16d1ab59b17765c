"""Worker processes on one schedule: one run per tick, whatever races or dies.

Real subprocesses on a real SQLite file and a real PostgreSQL schema, with a
clock the test moves through a file (no waiting for real ticks); a worker
dies by SIGKILL in the window between creating a tick's run and recording
the next tick.
"""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.crash import spawn

import stalwart as sw
from stalwart.schedules import tick_run_id

from ._policies import report
from .test_define import T0, Clock

APP = Path(__file__).with_name("sched_worker.py")


def set_clock(path: Path, t: float) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(repr(float(t)))
    os.replace(tmp, path)  # a worker never reads half a number


def start(url: str, clock: Path, tally: Path, *mode: str) -> subprocess.Popen[str]:
    proc = spawn(APP, url, clock, *mode, env={"SCHEDULE_TALLY": str(tally)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
    return proc


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def _define(url: str) -> None:
    async with sw.Runner(url) as client:
        client_schedules = sw.Schedules(client, clock=Clock(T0 + 1))
        await client_schedules.define(report, name="tick", every=60, day="x")


async def _runs(url: str) -> dict[str, str]:
    async with sw.Runner(url) as client:
        return {r.id: r.status for r in await client.list_runs(limit=1000)}


async def _schedule_next(url: str) -> int:
    async with sw.Runner(url) as client:
        client_schedules = sw.Schedules(client)
        return (await client_schedules.get("tick")).next_at


def wait_for(url: str, ids: list[str]) -> dict[str, str]:
    deadline = time.monotonic() + 30
    while True:
        runs = asyncio.run(_runs(url))
        if all(runs.get(i) == "succeeded" for i in ids):
            return runs
        assert time.monotonic() < deadline, runs
        time.sleep(0.05)


def executions(tally: Path) -> collections.Counter[str]:
    lines = tally.read_text().split("\n") if tally.exists() else []
    return collections.Counter(line.split()[0] for line in lines if line)


def test_two_workers_make_one_run_per_tick(store_url: str, tmp_path: Path) -> None:
    clock, tally = tmp_path / "clock", tmp_path / "tally"
    asyncio.run(_define(store_url))
    set_clock(clock, T0 + 1)
    workers = [start(store_url, clock, tally) for _ in range(2)]
    try:
        ticks = [T0 + 60 * k for k in (1, 2, 3)]
        for tick in ticks:
            set_clock(clock, tick + 1)  # both workers see the tick within a poll
            wait_for(store_url, [tick_run_id("tick", tick)])
        time.sleep(0.3)  # many more polls on both: nothing more may appear
        runs = asyncio.run(_runs(store_url))
    finally:
        stop(workers)
    assert sorted(runs) == [tick_run_id("tick", t) for t in ticks]
    assert executions(tally) == {tick_run_id("tick", t): 1 for t in ticks}
    assert asyncio.run(_schedule_next(store_url)) == T0 + 240


def test_a_worker_killed_between_run_and_next_tick_leaves_one_run(
    store_url: str, tmp_path: Path
) -> None:
    clock, tally = tmp_path / "clock", tmp_path / "tally"
    asyncio.run(_define(store_url))
    set_clock(clock, T0 + 1)
    doomed = start(store_url, clock, tally, "die")
    set_clock(clock, T0 + 61)
    assert doomed.wait(timeout=30) == -signal.SIGKILL
    first = tick_run_id("tick", T0 + 60)
    # It died after creating the tick's run, before recording the next tick.
    assert asyncio.run(_runs(store_url)) == {first: "pending"}
    assert asyncio.run(_schedule_next(store_url)) == T0 + 60
    survivor = start(store_url, clock, tally)
    try:
        wait_for(store_url, [first])
        set_clock(clock, T0 + 121)
        wait_for(store_url, [tick_run_id("tick", T0 + 120)])
        time.sleep(0.3)
        runs = asyncio.run(_runs(store_url))
    finally:
        stop([survivor])
    assert sorted(runs) == [first, tick_run_id("tick", T0 + 120)]
    assert executions(tally) == {first: 1, tick_run_id("tick", T0 + 120): 1}
    assert asyncio.run(_schedule_next(store_url)) == T0 + 180
