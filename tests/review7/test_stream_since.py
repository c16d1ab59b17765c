"""Attacks on the incremental event stream (commit ee3d3c7, Store.steps_since).

The stream polls a run's step count and reads steps only when it moved.
These drive :func:`run_events` over each store (memory, a real SQLite file,
a real PostgreSQL schema; the harness of tests/streams_incremental) and try
what a count alone cannot see: a continued-as-new run whose new generation
ends as long as the old, steps recorded in one microsecond, a step recorded
late by a skewed clock after many others, a prune mid-stream, and forged or
foreign ``Last-Event-ID`` values.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from tests.streams_incremental.test_streams_incremental import (
    START,
    Stream,
    make_store,
    polls,
    record,
    running,
    step,
    until,
)

import stalwart as sw
from stalwart.api.events import Cursor
from stalwart.stores.memory import MemoryStore

__all__ = ["make_store"]  # the fixture, used by name below


def test_a_new_generation_that_ends_as_long_as_the_old_is_streamed(
    make_store: Callable[[], Any],
) -> None:
    """A loop agent that continues as new every N steps: each generation has
    N steps. When a whole generation runs between two polls and the run then
    finishes, the client must still get the new generation's steps."""

    async def go() -> None:
        async with running(make_store, "same") as store:
            if isinstance(store, MemoryStore):
                pytest.skip("the memory store does not continue runs as new")
            fence = store.fence
            await record(store, "same", fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("same"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                store.gate = asyncio.Event()
                await until(lambda: store.blocked == 1)  # the stream waits to read
                await store.continue_run("same", fence, "{}", "same~1", step("0", START + 20))
                await record(store, "same", fence, step("1", START + 30))
                await store.finish_run("same", fence, "succeeded", '"done"', None)
                store.gate.set()
                await until(lambda: bool(stream.frames) and stream.frames[-1].event == "end")
                assert stream.keys() == ["1", "2", "0", "1"]
            finally:
                await stream.close()

    asyncio.run(go())


def test_steps_in_one_microsecond_are_each_sent_once(make_store: Callable[[], Any]) -> None:
    async def go() -> None:
        async with running(make_store, "tie") as store:
            fence = store.fence
            await record(store, "tie", fence, step("a", START))
            stream = Stream(store.runner, await store.get_run("tie"))
            try:
                await until(lambda: stream.keys() == ["a"])
                await polls(store, 2)
                # Three more at the very same instant as the first, in two writes.
                await record(store, "tie", fence, step("b", START), step("c", START))
                await until(lambda: len(stream.steps()) >= 3)
                await record(store, "tie", fence, step("d", START))
                await until(lambda: len(stream.steps()) >= 4)
                await polls(store, 3)
                assert sorted(stream.keys()) == ["a", "b", "c", "d"]
                assert len(stream.keys()) == 4
            finally:
                await stream.close()

    asyncio.run(go())


def test_a_late_step_far_behind_many_others_is_sent_once(make_store: Callable[[], Any]) -> None:
    """A step whose clock is an hour behind, recorded together with a normal
    one: the window misses it, the count does not."""

    async def go() -> None:
        async with running(make_store, "far") as store:
            fence = store.fence
            await record(store, "far", fence, *(step(str(i), START + 10 * i) for i in range(20)))
            stream = Stream(store.runner, await store.get_run("far"))
            try:
                await until(lambda: len(stream.steps()) == 20)
                store.gate = asyncio.Event()
                await until(lambda: store.blocked == 1)
                await record(
                    store, "far", fence, step("late", START - 3600), step("20", START + 200)
                )
                store.gate.set()
                await until(lambda: len(stream.steps()) == 22)
                await polls(store, 3)
                keys = stream.keys()
                assert len(keys) == 22 and len(set(keys)) == 22
                assert [Cursor.parse(f.id or "").seen for f in stream.steps()] == list(range(1, 23))
            finally:
                await stream.close()

    asyncio.run(go())


def test_a_prune_during_a_stream_ends_it_without_sending_steps_again(
    make_store: Callable[[], Any],
) -> None:
    """The stream holds two steps of a running run and waits to read; the
    run finishes and is pruned in between: the count falls to zero (as on
    continue-as-new), and the stream must end saying pruned, sending no step
    again and inventing none."""

    async def go() -> None:
        async with running(make_store, "gone") as store:
            fence = store.fence
            await record(store, "gone", fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("gone"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                store.gate = asyncio.Event()
                await until(lambda: store.blocked == 1)  # read the run, waits to read steps
                await store.finish_run("gone", fence, "succeeded", '"x"', None)
                assert await store.prune(keep=0) >= 1
                store.gate.set()
                await until(lambda: bool(stream.frames) and stream.frames[-1].event == "end")
            finally:
                await stream.close()
            assert stream.keys() == ["1", "2"]
            assert stream.frames[-1].data["status"] == "pruned"

    asyncio.run(go())


@pytest.mark.parametrize(
    "forged",
    [
        "2_1700000010.0_Mg==",  # a real-looking id, from another run
        "999999999999_1e308_AA==",
        "1_nan_Mg==",
        "-1",
        "1_2_%%%",
        "9" * 5000,
        "1_1.0_" + "A" * 10000,
        "٣",  # a digit int() reads, not one this API writes
    ],
)
def test_a_forged_last_event_id_is_data(forged: str) -> None:
    """A client's Last-Event-ID is parsed as data: a cursor or ValueError,
    never anything else (no crash, no evaluation)."""
    try:
        cursor = Cursor.parse(forged)
    except ValueError as exc:
        assert "is not an event id this API sent" in str(exc)
        assert len(str(exc)) < 300  # the id is cut, not echoed whole
        return
    assert cursor.seen >= 0


def test_a_cursor_from_another_run_never_hides_this_runs_steps(
    make_store: Callable[[], Any],
) -> None:
    """A Last-Event-ID taken from run A and sent to run B's stream: B's
    steps are other steps under the same keys and times; B's stream must
    send them (a client gets at worst a step twice, never misses one)."""

    async def go() -> None:
        async with running(make_store, "b") as store:
            fence = store.fence
            await record(
                store, "b", fence, step("1", START), step("2", START + 10), step("3", START + 20)
            )
            foreign = Cursor(2, (START + 10, "2"))  # what run A's client read
            stream = Stream(store.runner, await store.get_run("b"), foreign)
            try:
                await until(lambda: len(stream.steps()) >= 1)
                await polls(store, 3)
            finally:
                await stream.close()
            # Indistinguishable from A's: the cursor is by count, time and key.
            sent = stream.keys()
            assert "3" in sent

    asyncio.run(go())


_ = sw


def test_a_large_step_recorded_late_comes_back_whole(make_store: Callable[[], Any]) -> None:
    """A late step found by the full read, its value spilled out of the hot
    row (S11), with a new large step beside it: both merged back whole."""
    import json

    from stalwart.core.ledger import StepRecord
    from stalwart.stores.base import SPILL_BYTES

    big = "y" * (SPILL_BYTES * 2)

    def large(key: str, at: float) -> StepRecord:
        return StepRecord(key, "echo", "h", "{}", json.dumps(big + key), None, 1, at, at)

    async def go() -> None:
        async with running(make_store, "bigl") as store:
            fence = store.fence
            await record(store, "bigl", fence, step("1", START), large("2", START + 10))
            stream = Stream(store.runner, await store.get_run("bigl"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                store.gate = asyncio.Event()
                await until(lambda: store.blocked == 1)
                await record(
                    store, "bigl", fence, large("old", START - 600), large("3", START + 20)
                )
                store.gate.set()
                await until(lambda: len(stream.steps()) == 4)
                outputs = {f.data["key"]: f.data["output"] for f in stream.steps()}
                assert outputs == {"1": "1", "2": big + "2", "old": big + "old", "3": big + "3"}
            finally:
                await stream.close()

    asyncio.run(go())
