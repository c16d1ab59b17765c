"""Waiting, in a test, for a run to be suspended on a wait for a person."""

from __future__ import annotations

import asyncio

import stalwart as sw

__all__ = ["suspended"]


async def suspended(runner: sw.Runner, run_id: str) -> sw.RunRecord:
    """The run's record once it is suspended; fails if it ends instead."""
    for _ in range(1200):
        rec = await runner.get_run(run_id)
        if rec.status not in ("pending", "running"):
            assert rec.status == "suspended", f"{rec.status}: {rec.error}"
            return rec
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id!r} was never suspended")
