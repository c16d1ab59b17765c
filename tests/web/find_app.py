"""Runs to find and compare: a report over cities (one recorded weather
call each), a fork of one with a step's answer corrected, and a run whose
inputs are hostile markup."""

from __future__ import annotations

import stalwart as sw
from stalwart.timetravel import Replace, fork

from .web_app import HOSTILE


@sw.policy
async def weather(city: str) -> str:
    return {"Paris": "18 C", "Lyon": "20 C"}.get(city, "unknown")


@sw.policy
async def report(ctx: sw.Context, cities: list[str], note: str = "") -> str:
    seen = [await ctx.call(weather, city=c) for c in cities]
    return "weather: " + "; ".join(seen)


POLICIES = [report, weather]


async def seed_find(url: str) -> None:
    """``ticket-1`` (Paris, Lyon), its fork ``ticket-1-b`` with step 2's
    answer corrected, ``ticket-2`` (Nantes) and ``evil`` (hostile note)."""
    async with sw.Runner(url, policies=POLICIES) as runner:
        await runner.run(report, ["Paris", "Lyon"], note="refund requested", run_id="ticket-1")
        await runner.run(report, ["Nantes"], note="courier late", run_id="ticket-2")
        await runner.run(report, ["Paris"], note=HOSTILE, run_id="evil")
        handle = await fork(
            runner, "ticket-1", at="2", new_run_id="ticket-1-b", replace=Replace(result="21 C")
        )
        await handle.result()
