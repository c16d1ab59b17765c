"""Defining schedules: everything is checked before anything is stored, and a
schedule is idempotent by name (the same definition again changes nothing; a
new one replaces it). Pause, resume and delete. On SQLite, PostgreSQL, and the
memory store's half of the contract."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

import stalwart as sw
from stalwart import ScheduleError, ScheduleNotFound
from stalwart.schedules import Timing
from stalwart.stores import MemoryStore
from stalwart.stores.base import ScheduleRecord

from ._policies import other, report

T0 = 1_799_971_200  # 2027-01-15 00:00 UTC: a multiple of 60, 3600 and 86400


class Clock:
    """What time it is for the schedules under test: set by the test."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def runner(url: str, clock: Clock, **kw: Any) -> sw.Runner:
    return sw.Runner(url, policies=[report, other], **kw)


async def test_a_bad_cron_expression_names_the_field_and_stores_nothing(store_url: str) -> None:
    async with runner(store_url, Clock(T0)) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(ScheduleError, match=r"month field '13' is not valid \(allowed: 1-12"):
            await schedules.define(report, cron="*/15 * * 13 *")
        with pytest.raises(ScheduleError, match="the minute field '61'"):
            await schedules.define(report, cron="61 * * * *")
        with pytest.raises(ScheduleError, match="the day-of-week field 'FUNDAY'"):
            await schedules.define(report, cron="0 2 * * FUNDAY")
        with pytest.raises(ScheduleError, match="it has 3 fields, not 5"):
            await schedules.define(report, cron="* * *")
        with pytest.raises(ScheduleError, match="day-of-month field '30'"):
            await schedules.define(report, cron="0 0 30 2 *")  # 30 February: never
        assert await schedules.all() == []


async def test_an_unknown_time_zone_is_refused(store_url: str) -> None:
    async with runner(store_url, Clock(T0)) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Olympus'"):
            await schedules.define(report, cron="0 2 * * *", timezone="Mars/Olympus")
        with pytest.raises(ScheduleError, match=r"unknown time zone '\.\./\.\./etc/passwd'"):
            await schedules.define(report, cron="0 2 * * *", timezone="../../etc/passwd")
        with pytest.raises(ScheduleError, match="timezone applies to cron= only"):
            await schedules.define(report, every=60, timezone="Europe/Paris")
        assert await schedules.all() == []


async def test_inputs_are_checked_against_the_policy_schema_first(store_url: str) -> None:
    async with runner(store_url, Clock(T0)) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(sw.ArgumentError, match=r"schedule 'report'.*pages.*integer"):
            await schedules.define(report, every=60, pages="many")
        with pytest.raises(sw.ArgumentError, match="colour: unexpected argument"):
            await schedules.define(report, every=60, inputs={"colour": "red"})
        with pytest.raises(TypeError, match="day given both in inputs= and as keywords"):
            await schedules.define(report, every=60, inputs={"day": "a"}, day="b")
        assert await schedules.all() == []
        # Coerced as a model's arguments are: "3" is 3 in the stored inputs.
        s = await schedules.define(report, every=60, pages="3")
        assert json.loads(s.inputs) == {"args": [], "kwargs": {"pages": 3}}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of cron="),
        ({"cron": "* * * * *", "every": 60}, "exactly one of cron="),
        ({"every": 0.5}, "whole number of seconds, at least 1"),
        ({"every": timedelta(milliseconds=1500)}, "whole number of seconds"),
        ({"every": True}, "number of seconds or a timedelta"),
        ({"every": 60, "missed": "sometimes"}, "missed must be 'once'"),
        ({"every": 60, "grace": -1}, "grace cannot be negative"),
        ({"every": 60, "name": "a~b"}, "contains '~'"),
        ({"every": 60, "name": " padded"}, "white space"),
        ({"every": 60, "queue": ""}, "queue is a queue's name"),
        ({"every": 60, "priority": "high"}, "priority is an int"),
        ({"every": 60, "priority": 2**40}, "priority 1099511627776 is out of range"),
    ],
)
async def test_every_field_is_checked(tmp_path: Any, kwargs: dict[str, Any], message: str) -> None:
    async with runner(f"sqlite:///{tmp_path / 's.db'}", Clock(T0)) as r:
        schedules = sw.Schedules(r, clock=Clock(T0))
        with pytest.raises(ScheduleError, match=message):
            await schedules.define(report, **kwargs)
        assert await schedules.all() == []


async def test_the_same_definition_again_changes_nothing(store_url: str) -> None:
    clock = Clock(T0 + 10)
    async with runner(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        first = await schedules.define(report, every=timedelta(minutes=15), day="mon")
        assert first.name == "report"
        assert first.next_at == T0 + 900  # intervals align to the epoch
        clock.t = T0 + 5000
        again = await schedules.define(report, every=900, inputs={"day": "mon"})
        assert again == first  # not even updated_at moved


async def test_a_new_definition_replaces_the_old_one(store_url: str) -> None:
    clock = Clock(T0 + 10)
    async with runner(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        first = await schedules.define(report, name="nightly", cron="0 2 * * *", day="mon")
        assert first.next_at == T0 + 2 * 3600
        await schedules.pause("nightly")
        clock.t = T0 + 3 * 3600
        # Other inputs: replaced, the next tick stays, the pause stays.
        second = await schedules.define(report, name="nightly", cron="0 2 * * *", day="tue")
        assert '"tue"' in second.inputs
        assert second.next_at == first.next_at
        assert second.paused
        assert second.created_at == first.created_at
        # Other timing: the next tick is the new timing's first after now.
        third = await schedules.define(
            report, name="nightly", cron="0 2 * * *", timezone="Europe/Paris", day="tue"
        )
        assert third.timezone == "Europe/Paris"
        assert third.next_at == T0 + 86400 + 3600  # 02:00 in Paris is 01:00 UTC in January
        assert [s.name for s in await schedules.all()] == ["nightly"]


async def test_pause_resume_and_delete(store_url: str) -> None:
    clock = Clock(T0 + 10)
    async with runner(store_url, clock) as r:
        schedules = sw.Schedules(r, clock=clock)
        await schedules.define(report, name="a", every=60)
        await schedules.define(report, name="b", every=60)
        paused = await schedules.pause("a")
        assert paused.paused
        assert [s.name for s in await r.store.due_schedules(T0 + 10_000, 10)] == ["b"]
        clock.t = T0 + 10_000
        resumed = await schedules.resume("a")
        assert not resumed.paused
        assert resumed.next_at == T0 + 10_020  # the ticks it was paused for do not run
        assert await schedules.delete("a") is True
        with pytest.raises(ScheduleNotFound, match="no schedule 'a'"):
            await schedules.get("a")
        for action in (schedules.pause, schedules.resume, schedules.delete):
            with pytest.raises(ScheduleNotFound, match="no schedule 'a'"):
                await action("a")
        assert await schedules.delete("a", missing_ok=True) is False
        assert [s.name for s in await schedules.all()] == ["b"]


async def test_a_memory_runner_refuses_schedules() -> None:
    async with sw.Runner() as r:
        schedules = sw.Schedules(r)
        with pytest.raises(sw.StoreError, match="schedules need a durable store"):
            await schedules.define(report, every=60)


def _record(name: str, next_at: int) -> ScheduleRecord:
    return ScheduleRecord(name, "report", "{}", None, 60, "UTC", "once", 60.0, "q", 0, next_at)


@pytest.fixture(params=["durable", "memory"])
async def any_store(request: pytest.FixtureRequest, store_url: str) -> Any:
    """SQLite, PostgreSQL, and (once) the memory store."""
    if request.param == "memory":
        if not store_url.startswith("sqlite"):
            pytest.skip("the memory store runs once, beside SQLite")
        store: Any = MemoryStore()
    else:
        store = sw.stores.open_store(store_url)
    await store.open()
    yield store
    await store.close()


async def test_advancing_a_tick_is_a_compare_and_set(any_store: Any) -> None:
    store = any_store
    _, created = await store.create_schedule(_record("s", T0 + 60))
    assert created
    again, created = await store.create_schedule(_record("s", T0 + 999))
    assert not created and again.next_at == T0 + 60
    assert [s.name for s in await store.due_schedules(T0 + 59.9, 10)] == []
    assert [s.name for s in await store.due_schedules(T0 + 60.5, 10)] == ["s"]
    # Two workers move the same tick: one wins.
    assert await store.advance_schedule("s", T0 + 60, T0 + 120, T0 + 60) is True
    assert await store.advance_schedule("s", T0 + 60, T0 + 120, T0 + 60) is False
    got = await store.get_schedule("s")
    assert (got.next_at, got.last_at) == (T0 + 120, T0 + 60)
    # A paused schedule does not move, and is not due.
    assert await store.pause_schedule("s", True, None) is True
    assert await store.advance_schedule("s", T0 + 120, T0 + 180, T0 + 120) is False
    assert await store.due_schedules(T0 + 10_000, 10) == []
    assert await store.pause_schedule("s", False, T0 + 600) is True
    assert (await store.get_schedule("s")).next_at == T0 + 600
    assert await store.delete_schedule("s") is True
    assert await store.delete_schedule("s") is False
    assert await store.get_schedule("s") is None
    assert await store.pause_schedule("s", True, None) is False


def test_cron_timing_in_a_time_zone() -> None:
    paris = Timing.of("t", "30 2 * * *", None, "Europe/Paris")
    # 2027-03-28 is the spring-forward night in Paris: 02:30 does not exist
    # and the run happens at 03:00 (as Debian's cron does).
    before = 1_806_148_800  # 2027-03-27 12:00 UTC
    first = paris.following(before)
    assert first == 1_806_195_600  # 2027-03-28 01:00 UTC = 03:00 CEST
    assert paris.following(first) == 1_806_280_200  # 2027-03-29 00:30 UTC = 02:30 CEST
    # The latest tick at or before a time, found directly.
    assert paris.latest(1_806_280_200 + 86400 * 3 + 5, first) == 1_806_280_200 + 86400 * 3
    assert "02:30" in paris.describe() and "Europe/Paris" in paris.describe()
    # 2027-10-31 is the fall-back night: 02:30 happens twice, the run once.
    fall = paris.following(1_824_897_600)  # 2027-10-30 12:00 UTC
    assert fall == 1_824_942_600  # 2027-10-31 00:30 UTC = 02:30 CEST
    assert paris.following(fall) == fall + 86400 + 3600  # 2027-11-01 02:30 CET
    assert Timing.of("t", None, 900, "UTC").describe() == "every 15 min"
