"""A run's event stream reads what is new, not the run's whole ledger.

``GET /runs/{id}/events`` polls the store every ``poll`` seconds, and a
thousand-step run watched by a hundred clients used to decode a hundred
thousand rows each time. These tests drive :func:`run_events` over each
store (memory, a real SQLite file, a real PostgreSQL schema) wrapped so that
it counts the step rows its reads return, and check what a client relies
on: a quiet stream reads no step row, a new step costs its own rows, a step
recorded late with an earlier ``finished_at`` (another worker's clock) is
still streamed, a reconnect with ``Last-Event-ID`` gets what it lacks, a
compact step (arguments referring to an earlier step's) is shown whole, and
a run that continues as new streams its new generation.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tests.records import step_record

import stalwart as sw
from stalwart.api.events import Cursor, run_events
from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.core.stepargs import ext_node, step_hash
from stalwart.stores import open_store
from stalwart.stores.base import SPILL_BYTES, Store, this_host
from stalwart.stores.memory import MemoryStore

from .conftest import SSE, parse_event

OWNER = f"{this_host()}:{os.getpid()}:streams"
POLL = 0.01  # seconds between a stream's reads: many polls in little time
START = 1_700_000_000.0  # the first step's finished_at; steps are 10 s apart


class Counting:
    """Put before a store class: counts the reads of a run's steps and the
    step rows they return (what a stream decodes)."""

    reads = 0
    rows = 0
    gate: asyncio.Event | None = None  # when set and closed, reads wait for it
    blocked = 0  # reads waiting at the gate

    async def load_steps(self, run_id: str) -> dict[str, StepRecord]:
        found: dict[str, StepRecord] = await super().load_steps(run_id)  # type: ignore[misc]
        self.reads += 1
        self.rows += len(found)
        return found

    async def step_positions(
        self, run_id: str, known: int = -1, since: float = -math.inf
    ) -> tuple[int, dict[str, float]]:
        if self.gate is not None and not self.gate.is_set():
            self.blocked += 1
            await self.gate.wait()
        found: tuple[int, dict[str, float]] = await super().step_positions(  # type: ignore[misc]
            run_id, known, since
        )
        self.reads += 1
        return found

    async def steps_by_key(self, run_id: str, keys: Any, held: Any = None) -> dict[str, StepRecord]:
        found: dict[str, StepRecord] = await super().steps_by_key(  # type: ignore[misc]
            run_id, keys, held
        )
        self.rows += len(found)
        return found


def counting(cls: type[Any]) -> type[Any]:
    return type(f"Counting{cls.__name__}", (Counting, cls), {})


@pytest.fixture
def make_store(any_store_url: str) -> Callable[[], Any]:
    """A function building a fresh counting store of each kind, on the URL
    of the shared ``any_store_url`` (memory, SQLite, PostgreSQL)."""
    kind = type(open_store(any_store_url))
    if kind is MemoryStore:
        return lambda: counting(MemoryStore)()
    return lambda: counting(kind).from_url(any_store_url)


class Stream:
    """A client reading a run's stream in a task of its own."""

    def __init__(self, runner: sw.Runner, run: RunRecord, after: Cursor = Cursor()) -> None:
        self.frames: list[SSE] = []
        self._events = run_events(
            runner, run, after, poll=POLL, live=False, find_policy=lambda _: None
        )
        self._task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        async for text in self._events:
            if not text.startswith(":"):
                self.frames.append(parse_event(text))

    def steps(self) -> list[SSE]:
        return [f for f in self.frames if f.event == "step"]

    def keys(self) -> list[str]:
        return [f.data["key"] for f in self.steps()]

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await self._events.aclose()


async def until(what: Callable[[], bool]) -> None:
    """Wait until ``what()`` holds (a guard against hanging, not a timing test)."""

    async def wait() -> None:
        while not what():
            await asyncio.sleep(0.002)

    await asyncio.wait_for(wait(), 30)


async def polls(store: Any, n: int) -> None:
    """Wait until the store has answered ``n`` more reads of the run's steps."""
    goal = store.reads + n
    await until(lambda: store.reads >= goal)


def step(key: str, at: float, args: str = "{}", args_hash: str = "h") -> StepRecord:
    return step_record(
        key, json.dumps(key), name="echo", args_hash=args_hash, args=args, started_at=at
    )


@asynccontextmanager
async def running(make_store: Callable[[], Any], run_id: str) -> AsyncIterator[Any]:
    """A runner over a fresh counting store, and a run it holds (fence 1),
    as a worker on another machine would be executing it."""
    store = make_store()
    async with sw.Runner(store) as runner:
        await store.create_run(RunRecord(run_id, "echo", "{}"))
        claimed = await store.claim(run_id, OWNER, 3600.0)
        assert claimed is not None
        store.runner, store.fence = runner, claimed.fence
        yield store


async def record(store: Store, run_id: str, fence: int, *steps: StepRecord) -> None:
    for s in steps:
        await store.record_step(run_id, fence, s)


def test_a_quiet_stream_over_a_long_run_reads_no_step_row_per_poll(
    make_store: Callable[[], Any],
) -> None:
    n = 300

    async def go() -> None:
        async with running(make_store, "long") as store:
            await record(
                store, "long", store.fence, *(step(f"{i}", START + 10 * i) for i in range(1, n + 1))
            )
            stream = Stream(store.runner, await store.get_run("long"))
            try:
                await until(lambda: len(stream.steps()) == n)
                first = store.rows
                assert first == n  # the first read: every step, once
                await polls(store, 25)
                assert store.rows == first  # 25 quiet polls, not one step row read
                await record(store, "long", store.fence, step("new", START + 10 * (n + 1)))
                await until(lambda: len(stream.steps()) == n + 1)
                assert stream.keys()[-1] == "new"
                # The new step cost the rows near it, not the ledger's n + 1.
                assert store.rows - first <= 2
                settled = store.rows
                await polls(store, 10)
                assert store.rows == settled
            finally:
                await stream.close()

    asyncio.run(go())


def test_a_step_recorded_later_with_an_earlier_time_is_still_streamed(
    make_store: Callable[[], Any],
) -> None:
    async def go() -> None:
        async with running(make_store, "skew") as store:
            await record(store, "skew", store.fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("skew"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                cut = stream.steps()[-1].id
                await polls(store, 3)
                # Another worker, its clock minutes behind, records a step:
                # its finished_at is before both steps the client has.
                await record(store, "skew", store.fence, step("3", START - 300))
                await until(lambda: len(stream.steps()) == 3)
                # Slightly late, within the window the stream reads again.
                await record(store, "skew", store.fence, step("4", START + 9.5))
                await until(lambda: len(stream.steps()) == 4)
                await record(store, "skew", store.fence, step("5", START + 20))
                await until(lambda: len(stream.steps()) == 5)
                assert stream.keys() == ["1", "2", "3", "4", "5"]  # each once, none missed
                assert [Cursor.parse(f.id or "").seen for f in stream.steps()] == [1, 2, 3, 4, 5]
            finally:
                await stream.close()
            # A client that read up to "2" before "3" came cannot be resumed
            # behind it ("3" sorts before its cursor): it gets every step again.
            again = Stream(store.runner, await store.get_run("skew"), Cursor.parse(cut or ""))
            try:
                await until(lambda: len(again.steps()) == 5)
                assert sorted(again.keys()) == ["1", "2", "3", "4", "5"]
            finally:
                await again.close()

    asyncio.run(go())


def test_a_client_reconnecting_with_last_event_id_gets_only_what_it_lacks(
    make_store: Callable[[], Any],
) -> None:
    async def go() -> None:
        async with running(make_store, "resume") as store:
            fence = store.fence
            await record(store, "resume", fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("resume"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
            finally:
                await stream.close()
            last = stream.steps()[-1].id
            assert last is not None
            # While nobody listens, the run goes on.
            await record(store, "resume", fence, step("3", START + 20), step("4", START + 30))
            back = Stream(store.runner, await store.get_run("resume"), Cursor.parse(last))
            try:
                await until(lambda: len(back.steps()) == 2)
                assert back.keys() == ["3", "4"]
                assert [Cursor.parse(f.id or "").seen for f in back.steps()] == [3, 4]
                await record(store, "resume", fence, step("5", START + 40))
                await until(lambda: len(back.steps()) == 3)
                assert back.keys() == ["3", "4", "5"]
                quiet = store.rows
                await polls(store, 10)
                assert store.rows == quiet
                await store.finish_run("resume", fence, "succeeded", "5", None)
                await until(lambda: bool(back.frames) and back.frames[-1].event == "end")
                end = back.frames[-1]
            finally:
                await back.close()
            assert Cursor.parse(end.id or "").seen == 5
            # After the end, a reconnect gets only the end again.
            after_end = Stream(store.runner, await store.get_run("resume"), Cursor.parse(end.id))
            try:
                await until(lambda: bool(after_end.frames) and after_end.frames[-1].event == "end")
                assert after_end.steps() == []
            finally:
                await after_end.close()

    asyncio.run(go())


def test_a_new_compact_step_is_shown_with_its_whole_arguments(
    make_store: Callable[[], Any],
) -> None:
    """A step whose arguments extend an earlier step's (a conversation) is
    stored as a reference; read on its own, the stream rebuilds it whole."""
    whole_1, whole_2 = '{"xs":[1,2]}', '{"xs":[1,2,3]}'
    compact = '{"xs":' + ext_node("1", 2, ["3"]) + "}"

    async def go() -> None:
        async with running(make_store, "compact") as store:
            fence = store.fence
            await record(store, "compact", fence, step("1", START, whole_1, step_hash(whole_1)))
            stream = Stream(store.runner, await store.get_run("compact"))
            try:
                await until(lambda: stream.keys() == ["1"])
                await polls(store, 2)
                later = step("2", START + 10, compact, step_hash(whole_2))
                await record(store, "compact", fence, later)
                await until(lambda: stream.keys() == ["1", "2"])
                assert [f.data["arguments"] for f in stream.steps()] == [
                    {"xs": [1, 2]},
                    {"xs": [1, 2, 3]},
                ]
            finally:
                await stream.close()

    asyncio.run(go())


def test_a_run_that_continues_as_new_streams_its_new_generation(
    make_store: Callable[[], Any],
) -> None:
    """Continue-as-new moves the run's steps to an archive run, and the new
    generation reuses their keys: the stream sends the new steps."""

    async def go() -> None:
        async with running(make_store, "gen") as store:
            if isinstance(store, MemoryStore):
                pytest.skip("the memory store does not continue runs as new")
            fence = store.fence
            await record(store, "gen", fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("gen"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                await polls(store, 2)
                await store.continue_run("gen", fence, "{}", "gen~1", step("0", START + 20))
                await until(lambda: len(stream.steps()) == 3)
                await record(store, "gen", fence, step("1", START + 30))
                await until(lambda: len(stream.steps()) == 4)
                assert stream.keys() == ["1", "2", "0", "1"]
                assert [f.data["finished_at"] for f in stream.steps()[2:]] == [
                    START + 20,
                    START + 30,
                ]
                # The ids count the new generation's steps from the first.
                assert [Cursor.parse(f.id or "").seen for f in stream.steps()] == [1, 2, 1, 2]
            finally:
                await stream.close()

    asyncio.run(go())


def test_large_values_kept_out_of_the_hot_rows_come_back_whole(
    make_store: Callable[[], Any],
) -> None:
    """Values over the spill size live in another table (S11): the first
    read and a new step's read both merge them back."""
    big = "x" * (SPILL_BYTES * 2)

    def large(key: str, at: float) -> StepRecord:
        return step_record(key, json.dumps(big + key), name="echo", started_at=at)

    async def go() -> None:
        async with running(make_store, "big") as store:
            fence = store.fence
            await record(store, "big", fence, large("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("big"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                await polls(store, 2)
                await record(store, "big", fence, large("3", START + 20))
                await until(lambda: len(stream.steps()) == 3)
                outputs = [f.data["output"] for f in stream.steps()]
                assert outputs == [big + "1", "2", big + "3"]
            finally:
                await stream.close()

    asyncio.run(go())


def test_step_positions_count_and_return_the_window_in_every_store(
    make_store: Callable[[], Any],
) -> None:
    """The store method itself: the count always; no position when the
    reader has them all; the keys and times of the steps at or after
    ``since`` when it does not; and the records read by key, whole."""

    async def go() -> None:
        async with running(make_store, "since") as store:
            assert await store.step_positions("since", 0, -math.inf) == (0, {})
            steps = [step(str(i), START + i) for i in range(1, 6)]
            await record(store, "since", store.fence, *steps)
            count, found = await store.step_positions("since", 5, -math.inf)
            assert (count, found) == (5, {})  # the reader has all five: no row
            count, found = await store.step_positions("since", 3, START + 4)
            assert (count, found) == (5, {"4": START + 4, "5": START + 5})
            count, found = await store.step_positions("since", 0, -math.inf)
            assert count == 5 and found == {s.key: s.finished_at for s in steps}
            assert await store.step_positions("no-such-run", 0, -math.inf) == (0, {})
            assert await store.steps_by_key("since", ["5", "2", "nine"]) == {
                "5": steps[4],
                "2": steps[1],
            }
            # The Store's defaults (for stores that do not answer from a count)
            # read every step, and answer the same.
            for known, since in ((5, -math.inf), (3, START + 3), (0, -math.inf)):
                ours = await store.step_positions("since", known, since)
                assert await Store.step_positions(store, "since", known, since) == ours
            ours_by_key = await store.steps_by_key("since", ["1", "3"])
            assert await Store.steps_by_key(store, "since", ["1", "3"]) == ours_by_key

    asyncio.run(go())


def test_a_new_generation_as_long_as_the_old_is_streamed_at_once(
    make_store: Callable[[], Any],
) -> None:
    """Between two polls the run continues as new and its new generation
    grows back to as many steps as the stream holds: the count alone looks
    the same, but the generation's record (key "0"), which every read
    returns, is one the stream does not hold: it starts over with the new
    generation."""

    async def go() -> None:
        async with running(make_store, "regrow") as store:
            if isinstance(store, MemoryStore):
                pytest.skip("the memory store does not continue runs as new")
            fence = store.fence
            await record(store, "regrow", fence, step("1", START), step("2", START + 10))
            stream = Stream(store.runner, await store.get_run("regrow"))
            try:
                await until(lambda: stream.keys() == ["1", "2"])
                store.gate = asyncio.Event()
                await until(lambda: store.blocked == 1)  # the stream waits to read
                await store.continue_run("regrow", fence, "{}", "regrow~1", step("0", START + 20))
                await record(store, "regrow", fence, step("1", START + 30))
                store.gate.set()  # two steps, as it holds two, one the generation's record
                await until(lambda: stream.keys() == ["1", "2", "0", "1"])  # seen at once
                await record(store, "regrow", fence, step("2", START + 40))
                await until(lambda: len(stream.steps()) == 5)
                assert stream.keys() == ["1", "2", "0", "1", "2"]
                assert [f.data["finished_at"] for f in stream.steps()[2:]] == [
                    START + 20,
                    START + 30,
                    START + 40,
                ]
            finally:
                await stream.close()

    asyncio.run(go())


# What a step count alone cannot see (Store.step_positions).
#
# The stream polls a run's step count and reads steps only when it moved.
# These drive :func:`run_events` over each store (memory, a real SQLite file,
# a real PostgreSQL schema; the harness above) and try
# what a count alone cannot see: a continued-as-new run whose new generation
# ends as long as the old, steps recorded in one microsecond, a step recorded
# late by a skewed clock after many others, a prune mid-stream, and forged or
# foreign ``Last-Event-ID`` values.


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

    from stalwart.stores.base import SPILL_BYTES

    big = "y" * (SPILL_BYTES * 2)

    def large(key: str, at: float) -> StepRecord:
        return step_record(key, json.dumps(big + key), name="echo", started_at=at)

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
