"""Policies the schedule tests run, in-process and in worker subprocesses."""

from __future__ import annotations

import os

import stalwart as sw

#: Run ids executed in this process, in order (in-process tests read it).
RAN: list[str] = []


@sw.policy
async def report(ctx: sw.Context, day: str = "today", pages: int = 1) -> str:
    """Write a report.

    Args:
        day: Which day it covers.
        pages: How many pages.
    """
    RAN.append(ctx.run_id)
    tally = os.environ.get("SCHEDULE_TALLY")
    if tally:
        with open(tally, "a") as f:
            f.write(f"{ctx.run_id} {os.getpid()}\n")
    return f"{day}: {pages} page(s)"


@sw.policy
async def other(ctx: sw.Context) -> str:
    return "other"
