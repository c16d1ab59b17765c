"""A schedule's tags: checked where it is defined, kept with it, changed by
a new definition, and given to every run it starts."""

from __future__ import annotations

import pytest

import stalwart as sw
from stalwart.core.tags import decode_tags
from stalwart.schedules import tick_run_id

from ._policies import RAN, report
from .test_define import T0, Clock
from .test_ticking import serving, settled

GOLD = {"customer": "c-42", "tier": "gold"}


async def test_each_tick_of_a_tagged_schedule_starts_a_tagged_run(store_url: str) -> None:
    RAN.clear()
    clock = Clock(T0 + 1)
    async with serving(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        defined = await schedules.define(report, name="gold", every=900, day="mon", tags=GOLD)
        assert decode_tags(defined.tags) == GOLD
        clock.t = T0 + 900 + 2
        assert await settled(r, "gold", 1) == [tick_run_id("gold", T0 + 900)]
        found = await r.list_runs(tags={"customer": "c-42"})
        assert [x.id for x in found] == [tick_run_id("gold", T0 + 900)]


async def test_a_new_definition_changes_the_tags(store_url: str) -> None:
    async with sw.Runner(store_url) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        await schedules.define(report, name="s", every=60, day="mon", tags={"a": "1"})
        again = await schedules.define(report, name="s", every=60, day="mon", tags={"a": "2"})
        assert decode_tags(again.tags) == {"a": "2"}
        plain = await schedules.define(report, name="s", every=60, day="mon")
        assert plain.tags is None


async def test_bad_tags_are_a_schedule_error_naming_the_schedule(store_url: str) -> None:
    async with sw.Runner(store_url) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(sw.ScheduleError, match=r"schedule 'bad': tags: tag key 'no way'"):
            await schedules.define(report, name="bad", every=60, day="mon", tags={"no way": "x"})
        assert await schedules.all() == []
