"""Runner mechanisms pinned because a mutation pass found them unguarded.

Each test fails when the mechanism it names is removed from the runner
(its worker loop and run table; docs/mutation.md says how the pass is
run). Timing is pinned through counts, never through durations: the runner's clock is a
fake one the test moves, and a store wrapper counts the runner's calls.

* S8: a runner renews its leases every third of the lease, no later (the
  lease would lapse) and no sooner (a write per run per loop turn).
* S8: a heartbeat that reports a run lost stops that run's execution there
  and then, with a warning naming the run; one that reports a cancel
  request cancels it (S9).
* S14: where an error belongs decides what the runner does with the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

import stalwart as sw
import stalwart.runner.table as table_module
import stalwart.runner.worker as worker_module
from stalwart.stores.base import Beat
from stalwart.stores.sqlite import SQLiteStore

EVENTS: list[str] = []
RELEASE: dict[str, asyncio.Event] = {}


@pytest.fixture(autouse=True)
def _reset() -> None:
    EVENTS.clear()
    RELEASE.clear()


class FakeClock:
    """The runner's ``time`` module: wall time moves only when a test says."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(worker_module, "time", fake)
    monkeypatch.setattr(table_module, "time", fake)
    return fake


class CountingStore(SQLiteStore):
    """A real SQLite store that counts the background loop's turns and
    heartbeats, and can fail chosen writes the way a store fails."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.turns = 0
        self.beats: list[Beat] = []
        self.fail_finish: list[Exception] = []
        #: When set, the next heartbeat naming runs waits for it to open
        #: before it reaches the store (a reply still in flight).
        self.gate: asyncio.Event | None = None
        #: The same, for the store's reply to the next heartbeat naming runs.
        self.reply_gate: asyncio.Event | None = None
        self.held = False

    async def next_wake(self) -> float | None:
        self.turns += 1  # once per turn of the runner's background loop
        return await super().next_wake()

    async def heartbeat(self, owner: str, lease: float, run_ids: Sequence[str]) -> Beat:
        gate = self.gate
        if gate is not None and run_ids:
            self.gate = None
            self.held = True
            await gate.wait()
        beat = await super().heartbeat(owner, lease, run_ids)
        reply_gate = self.reply_gate
        if reply_gate is not None and run_ids:
            self.reply_gate = None
            self.held = True
            await reply_gate.wait()
        self.beats.append(beat)
        return beat

    async def finish_run(
        self, run_id: str, fence: int, status: str, result: str | None, error: str | None
    ) -> None:
        if self.fail_finish:
            raise self.fail_finish.pop(0)
        await super().finish_run(run_id, fence, status, result, error)


async def _turns(store: CountingStore, n: int = 2) -> None:
    """Let the background loop make ``n`` more turns."""
    target = store.turns + n
    while store.turns < target:
        await asyncio.sleep(0.002)


@sw.policy
async def held(tag: str) -> str:
    """A step that runs until released, saying how it ended."""
    EVENTS.append(f"start {tag}")
    try:
        await RELEASE.setdefault(tag, asyncio.Event()).wait()
    except asyncio.CancelledError:
        EVENTS.append(f"cancelled {tag}")
        raise
    EVENTS.append(f"done {tag}")
    return tag


@sw.policy
async def holder(tag: str) -> str:
    return await held(tag)


# -- S8: lease renewal every third of the lease -------------------------------------------
async def test_leases_are_renewed_every_third_of_the_lease(
    tmp_path: Path, clock: FakeClock
) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(store, lease=30.0, poll_interval=0.005, policies=[holder]) as runner:
        await runner.start(holder, "a", run_id="a")
        start = clock.now
        await _turns(store, 3)
        assert len(store.beats) == 1  # one beat when the loop starts, none per turn
        clock.now = start + 9.99
        await _turns(store)
        assert len(store.beats) == 1  # a third of the lease has not passed yet
        clock.now = start + 10.0
        await _turns(store)
        assert len(store.beats) == 2
        clock.now = start + 19.99
        await _turns(store)
        assert len(store.beats) == 2  # counted from the last beat, not from the start
        clock.now = start + 20.0
        await _turns(store)
        assert len(store.beats) == 3
        assert [b.lost for b in store.beats] == [[], [], []]  # renewed, so still ours
        assert EVENTS == ["start a"]
        RELEASE["a"].set()


# -- S8, S9: what a heartbeat reports is acted on ----------------------------------------
def _take_over(db_path: Path, run_id: str) -> None:
    """Another worker claims the run (as after a long pause of ours)."""
    db = sqlite3.connect(db_path)
    with db:
        db.execute(
            "UPDATE runs SET fence = fence + 1, owner = 'elsewhere:1:x' WHERE id = ?", (run_id,)
        )
    db.close()


async def test_a_run_reported_lost_stops_at_once_and_writes_nothing(
    tmp_path: Path, clock: FakeClock
) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(store, lease=30.0, poll_interval=0.005, policies=[holder]) as runner:
        await runner.start(holder, "lost", run_id="lost")
        while EVENTS != ["start lost"]:
            await asyncio.sleep(0.002)
        _take_over(tmp_path / "ledger.db", "lost")
        clock.now += 10.0  # the next heartbeat is due
        while not any(b.lost for b in store.beats):
            await _turns(store, 1)
        await _turns(store)
        assert EVENTS == ["start lost", "cancelled lost"]  # stopped, not left running
        rec = await runner.get_run("lost")
        assert (rec.status, rec.owner) == ("running", "elsewhere:1:x")  # nothing written
        assert await runner.steps("lost") == []


async def test_a_run_reported_lost_is_logged_as_taken_over_and_stopped_not_handed_back(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    """What an operator reads when a worker stops a run another took over: a
    warning naming the run and this runner, then the run's end as stopped
    here (its new holder writes it), never as handed back."""
    caplog.set_level(logging.INFO, logger="stalwart")
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(store, lease=30.0, poll_interval=0.005, policies=[holder]) as runner:
        await runner.start(holder, "gone", run_id="gone")
        while EVENTS != ["start gone"]:
            await asyncio.sleep(0.002)
        _take_over(tmp_path / "ledger.db", "gone")
        clock.now += 10.0
        async with asyncio.timeout(30):  # a loop stopped by a broken log call fails here
            while EVENTS != ["start gone", "cancelled gone"]:
                await _turns(store, 1)
    warned = [r for r in caplog.records if getattr(r, "event", None) == "run.lease_lost"]
    assert len(warned) == 1
    (w,) = warned
    assert (w.name, w.levelno) == ("stalwart.runner", logging.WARNING)
    assert (w.run_id, w.owner) == ("gone", runner.owner)  # type: ignore[attr-defined]
    assert w.getMessage() == (
        "run 'gone': its lease was lost, another worker took it over; stopping here"
    )
    ends = [
        (r.event, r.status)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "run_id", None) == "gone" and r.event in ("run.stopped", "run.released")  # type: ignore[attr-defined]
    ]
    assert ends == [("run.stopped", "lost")]


async def test_a_run_that_finishes_while_its_heartbeat_is_in_flight_is_left_alone(
    tmp_path: Path, clock: FakeClock
) -> None:
    """A heartbeat sent while a run executes is answered after the run has
    finished, so the store reports it lost (no longer running in our name):
    there is nothing left to stop, and the loop carries on."""
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(
        store, lease=30.0, poll_interval=0.005, policies=[holder, quick_root]
    ) as runner:
        handle = await runner.start(holder, "r", run_id="r")
        while EVENTS != ["start r"]:
            await asyncio.sleep(0.002)
        gate = store.gate = asyncio.Event()
        clock.now += 10.0  # the next heartbeat is due; its reply waits at the gate
        async with asyncio.timeout(30):
            while not store.held:
                await asyncio.sleep(0.002)
            RELEASE["r"].set()
            assert await handle.result() == "r"
            gate.set()
            while not store.beats or store.beats[-1].lost != ["r"]:
                await asyncio.sleep(0.002)
            await _turns(store)  # the loop still turns
            assert await runner.run(quick_root, 1) == 2
        assert EVENTS == ["start r", "done r", "quick 1"]


async def test_a_run_that_finishes_while_the_reply_asking_its_cancel_is_in_flight_is_left_alone(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The store's reply to a heartbeat says a run was asked to cancel, but
    the run finishes before the reply is read: there is nothing left to
    cancel, and the loop carries on."""
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(
        store, lease=30.0, poll_interval=0.005, policies=[holder, quick_root]
    ) as runner:
        handle = await runner.start(holder, "c", run_id="c")
        while EVENTS != ["start c"]:
            await asyncio.sleep(0.002)
        await store.request_cancel("c")  # from another process: only the store knows
        gate = store.reply_gate = asyncio.Event()
        clock.now += 10.0  # the next heartbeat is due; the store's reply waits at the gate
        async with asyncio.timeout(30):
            while not store.held:
                await asyncio.sleep(0.002)
            RELEASE["c"].set()
            with contextlib.suppress(sw.CancelledRun):  # it ends, whichever way
                await handle.result()
            gate.set()
            while not store.beats or store.beats[-1].cancel != ["c"]:
                await asyncio.sleep(0.002)
            await _turns(store)  # the loop still turns
            assert await runner.run(quick_root, 1) == 2
        assert EVENTS == ["start c", "done c", "quick 1"]


async def test_a_cancel_request_reaches_the_holder_through_its_heartbeat(
    tmp_path: Path, clock: FakeClock
) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(store, lease=30.0, poll_interval=0.005, policies=[holder]) as runner:
        handle = await runner.start(holder, "c", run_id="c")
        while EVENTS != ["start c"]:
            await asyncio.sleep(0.002)
        await store.request_cancel("c")  # from another process: only the store knows
        clock.now += 10.0
        with pytest.raises(sw.CancelledRun, match="'c' was cancelled"):
            await handle.result(timeout=10)
        assert EVENTS == ["start c", "cancelled c"]
        assert (await runner.get_run("c")).status == "cancelled"


# -- S14: a store that is down is waited for; a permanent error fails the run ---------------
@sw.policy
async def quick(x: int) -> int:
    EVENTS.append(f"quick {x}")
    return x + 1


@sw.policy
async def quick_root(x: int) -> int:
    return await quick(x)


async def test_a_transient_store_failure_leaves_the_run_to_be_resumed(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    store.fail_finish.append(sw.StoreUnavailable("the store is busy"))
    async with sw.Runner(store, poll_interval=0.01, policies=[quick_root]) as runner:
        handle = await runner.start(quick_root, 1, run_id="t")
        assert await handle.result(timeout=10) == 2  # resumed by replay, not failed
    assert EVENTS == ["quick 1"]


async def test_a_run_dropped_on_an_unavailable_store_waits_before_it_is_retried(
    tmp_path: Path, clock: FakeClock
) -> None:
    """S14: nothing loops. A store that keeps refusing a run's writes is asked
    again after a backoff, not at every turn of the background loop."""
    store = CountingStore(tmp_path / "ledger.db")
    store.fail_finish = [sw.StoreUnavailable("the store is busy") for _ in range(50)]

    def attempts() -> int:
        return 50 - len(store.fail_finish)

    async with sw.Runner(store, poll_interval=0.01, policies=[quick_root]) as runner:
        handle = await runner.start(quick_root, 1, run_id="b")
        await _turns(store, 30)  # many chances to re-claim at once: the clock stands still
        assert attempts() == 1
        clock.now += 60.0  # past any backoff
        await _turns(store, 30)
        assert attempts() == 2  # retried once, then waiting again
        store.fail_finish.clear()
        clock.now += 60.0
        assert await handle.result(timeout=10) == 2
    assert EVENTS == ["quick 1"]  # the step ran once; the retries replayed it


async def test_a_permanent_store_error_fails_the_run_with_its_message(tmp_path: Path) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    store.fail_finish.append(sw.StoreError("this run takes no more writes"))
    async with sw.Runner(store, poll_interval=0.01, policies=[quick_root]) as runner:
        handle = await runner.start(quick_root, 1, run_id="p")
        with pytest.raises(sw.StoreError, match="takes no more writes"):
            await handle.result(timeout=10)
        assert (await runner.get_run("p")).status == "failed"
    assert EVENTS == ["quick 1"]


# -- S7, S8: the loop wakes for timers and beats, and outlives a failing store --------------
@sw.policy
async def naps(ctx: sw.Context) -> str:
    await ctx.sleep(0.05)
    return "rested"


async def test_a_durable_sleep_wakes_at_its_time_not_at_the_next_poll(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = sqlite_url
    # Neither the poll (60 s) nor the next heartbeat (a third of 600 s) is near.
    runner = sw.Runner(url, lease=600, poll_interval=60, inline_sleep=0, policies=[naps])
    async with runner:
        handle = await runner.start(naps, run_id="nap")
        assert await handle.result(timeout=10) == "rested"  # not after the 60 s poll
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


async def test_a_poll_interval_longer_than_the_lease_does_not_delay_heartbeats(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    store = CountingStore(tmp_path / "ledger.db")
    async with sw.Runner(store, lease=0.3, poll_interval=60):
        await asyncio.wait_for(_turns(store, 3), 10)  # the loop wakes for its next beat
        assert len(store.beats) == 1
        clock.now += 0.1
        await asyncio.wait_for(_turns(store, 2), 10)
        assert len(store.beats) == 2
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


class FailingWakes(CountingStore):
    """A store whose next-wake query fails once, as a store under strain does."""

    def __init__(self, path: Path, error: Exception) -> None:
        super().__init__(path)
        self.error: Exception | None = error

    async def next_wake(self) -> float | None:
        self.turns += 1
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return await SQLiteStore.next_wake(self)


@pytest.mark.parametrize(
    "error", [sw.StoreUnavailable("busy"), sw.CorruptedRecord("a bad row")], ids=["down", "bad-row"]
)
async def test_the_background_loop_outlives_a_failing_store(
    tmp_path: Path, error: Exception
) -> None:
    store = FailingWakes(tmp_path / "ledger.db", error)
    async with sw.Runner(store, poll_interval=0.01):
        await asyncio.wait_for(_turns(store, 5), 10)  # still turning: heartbeats go on
    assert store.error is None


# -- S10: every way a child ends wakes its waiting parent ------------------------------------
@sw.policy
async def child_fails(x: int) -> int:
    raise ValueError(f"child {x}")


class Unrecordable:
    pass


@sw.policy
async def child_unrecordable() -> Unrecordable:
    return Unrecordable()


@sw.policy
async def parent_of_three(ctx: sw.Context) -> list[str]:
    seen: list[str] = []
    for target, args in ((child_fails, (1,)), (child_unrecordable, ()), (held, ("child",))):
        child = await ctx.spawn(target, *args)
        try:
            await child.result()
        except Exception as exc:
            seen.append(type(exc).__name__)
    return seen


async def test_a_failed_or_cancelled_child_wakes_its_parent(sqlite_url: str) -> None:
    url = sqlite_url
    async with sw.Runner(url, poll_interval=0.01, policies=[parent_of_three]) as runner:
        handle = await runner.start(parent_of_three, run_id="parent")
        while "start child" not in EVENTS:
            await asyncio.sleep(0.005)
        [child] = [r for r in await runner.list_runs() if r.policy == held.name]
        await runner.cancel(child.id)
        assert await handle.result(timeout=10) == [
            "ValueError",
            "SerializationError",
            "CancelledRun",
        ]
