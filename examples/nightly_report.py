"""A nightly report on a timetable: ``sw.Schedules(runner).define(report, cron=...)``.

Run a worker that starts the report every night at 02:00, Paris time:

    python examples/nightly_report.py --store sqlite:///reports.db serve

and look at the schedule with ``stalwart schedules list --store sqlite:///reports.db``.
Any number of such workers may run (on PostgreSQL, on many machines): each
night still makes one report.

Without waiting for 2 AM: ``python examples/nightly_report.py simulate``
plays a few nights in a second, moving the schedule's clock by hand (as the
tests do), then stops every worker for three nights and shows what the
schedule's ``missed="once"`` policy does when they come back: one catch-up
report, not three.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import stalwart as sw
from stalwart.schedules import tick_of


@sw.policy
async def collect(day: str, team: str) -> dict[str, int]:
    """The day's numbers (a stand-in for the queries a real report makes)."""
    seed = sum(map(ord, day + team))
    opened = 20 + seed % 40
    return {"opened": opened, "closed": opened - seed % 7}


@sw.policy
async def report(ctx: sw.Context, team: str) -> str:
    """The report for the night this run was scheduled for."""
    tick = tick_of(ctx.run_id)
    night = tick[1] if tick is not None else datetime.now(UTC)
    day = (night - timedelta(days=1)).strftime("%Y-%m-%d")  # the day that just ended
    numbers = await collect(day, team)  # a recorded step: never redone on resume
    return f"{team} on {day}: {numbers['opened']} tickets opened, {numbers['closed']} closed"


async def define(schedules: sw.Schedules) -> None:
    """Declare the schedule. Safe to run at every deploy: the same definition
    changes nothing, a new one replaces it."""
    await schedules.define(
        report,
        name="nightly-report",
        cron="0 2 * * *",
        timezone="Europe/Paris",
        missed="once",  # a night no worker was up for: one catch-up report
        team="platform",
    )


async def serve(store: str) -> None:
    runner = sw.Runner(store, policies=[report])
    await define(sw.Schedules(runner))  # ticked by this runner's loop while it serves
    print("serving; the report runs every night at 02:00 Europe/Paris (Ctrl-C stops)")
    await runner.serve()


class Clock:
    """The schedule's clock in the simulation: moved by hand."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def _reports(runner: sw.Runner, seen: set[str]) -> list[str]:
    """Wait for the schedule's new runs to finish; their results."""
    for _ in range(500):
        runs = [r for r in await runner.list_runs() if r.id.startswith("nightly-report@")]
        new = sorted(r.id for r in runs if r.id not in seen)
        if new and all(r.status == "succeeded" for r in runs):
            seen.update(new)
            return [await runner.outcome(run_id) for run_id in new]
        await asyncio.sleep(0.02)
    raise TimeoutError("the worker did not start the report")


async def simulate(store: str, nights: int) -> None:
    # 01:00:30 UTC is 02:00:30 in Paris in January: just after a tick.
    clock = Clock(datetime(2027, 1, 9, 1, 0, 30, tzinfo=UTC).timestamp())
    seen: set[str] = set()
    # serving=True: this runner is a worker (it ticks the schedules made over
    # it); clock: what time it is for its schedules, here the simulation's.
    worker = sw.Runner(store, policies=[report], serving=True, poll_interval=0.02)
    schedules = sw.Schedules(worker, clock=clock)
    async with worker:
        await define(schedules)
        for _ in range(nights):
            clock.t += 86400  # a night later: its tick is due, and on time
            for line in await _reports(worker, seen):
                print(line)
    print("every worker stops for three nights...")
    clock.t += 3 * 86400 + 11 * 3600  # back at noon: the last tick is 11 hours late
    again = sw.Runner(store, policies=[report], serving=True, poll_interval=0.02)
    again_schedules = sw.Schedules(again, clock=clock)
    async with again:
        for line in await _reports(again, seen):
            print(f"{line}  (catch-up: one report for three missed nights)")
        s = await again_schedules.get("nightly-report")
        print(f"next tick: {datetime.fromtimestamp(s.next_at, UTC):%Y-%m-%d %H:%M} UTC")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=None, help="store URL (default: a temporary file)")
    parser.add_argument("mode", choices=["serve", "simulate"], nargs="?", default="simulate")
    parser.add_argument("--nights", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.store or f"sqlite:///{Path(tmp) / 'reports.db'}"
        if args.mode == "serve":
            asyncio.run(serve(url))
        else:
            asyncio.run(simulate(url, args.nights))
