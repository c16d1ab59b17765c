"""fork(rebase=True): new code whose calls differ from the record forks a
run; the prefix answers with its recorded outcomes under the identity the
new code gives them, executing nothing, and the fork runs live from `at`."""

from __future__ import annotations

import pytest

import stalwart as sw
from stalwart.core.errors import NonDeterminismError
from stalwart.timetravel import fork

executed: list[str] = []


@sw.policy
async def lookup(city: str) -> str:
    executed.append(city)
    return f"{city}: 18 C"


@sw.policy(name="report")
async def report(ctx: sw.Context, cities: list[str]) -> str:
    found = [await ctx.call(lookup, c) for c in cities]
    return "; ".join(found)


@sw.policy(name="report")
async def report_upper(ctx: sw.Context, cities: list[str]) -> str:
    found = [await ctx.call(lookup, c.upper()) for c in cities]
    return " | ".join(found)


async def test_new_code_forks_onto_the_recorded_prefix_without_executing_it(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[report]) as runner:
        await runner.run(report, ["Paris", "Lyon", "Nice"], run_id="r")
    executed.clear()
    async with sw.Runner(store_url, policies=[report_upper]) as runner:
        handle = await fork(runner, "r", at="3", new_run_id="r-up", policy=report_upper,
                            rebase=True)  # fmt: skip
        assert await handle.result() == "Paris: 18 C | Lyon: 18 C | NICE: 18 C"
        assert executed == ["NICE"]  # steps 1 and 2 answered from the record
        steps = {s.key: s for s in await runner.steps("r-up")}
        assert '"PARIS"' in (steps["1"].args or "")  # the identity the new code asks with
        again = await fork(runner, "r", at="3", new_run_id="r-strict", policy=report_upper)
        with pytest.raises(NonDeterminismError, match="step 1 of run r-strict"):
            await again.result()
