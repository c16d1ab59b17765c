"""What a worker claims: a run of its own that woke is taken however many
other ready runs stand before it, and runs it may not take stay where they
are. Real Runners on a real SQLite file and real PostgreSQL."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import stalwart as sw
from stalwart.runner.worker import CLAIM_BATCH

from .claim_app import left_behind

BOUND = 30.0  # a hang fails the test
CROWD = 200  # more ready runs than one claim reads (its batch, twice over)
APP = Path(__file__).with_name("claim_app.py")


@sw.policy
async def waits(ctx: sw.Context) -> str:
    got = await ctx.wait_for("go")
    return f"got {got}"


@sw.policy
async def other(n: int) -> int:
    return n


async def _until_suspended(runner: sw.Runner, run_id: str) -> None:
    async with asyncio.timeout(BOUND):
        while (await runner.get_run(run_id)).status != "suspended":
            await asyncio.sleep(0.01)


async def test_a_run_of_ours_woken_behind_a_crowd_of_others_is_claimed(store_url: str) -> None:
    """A runner that does not serve executes its own runs only. When one of
    them wakes while the store holds more ready runs of higher priority than
    a claim reads, all of them runs it may not take, it is still claimed."""
    async with sw.Runner(store_url, policies=[waits, other], poll_interval=0.05) as runner:
        handle = await runner.start(waits, run_id="ours")
        await _until_suspended(runner, "ours")
        async with sw.Runner(store_url) as producer:  # enqueues, serves nothing
            await producer.enqueue_many([sw.RunCall(other, i) for i in range(CROWD)], priority=5)
            await producer.signal("ours", "go", 1)  # from elsewhere: the store wakes it
        async with asyncio.timeout(BOUND):
            assert await handle.result() == "got 1"
        waiting = await runner.list_runs(status="pending", limit=CROWD + 1)
    assert len(waiting) == CROWD  # not ours to take: it serves nothing


async def test_a_run_of_ours_that_woke_is_claimed_while_others_of_ours_still_wait(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[waits, other], poll_interval=0.05) as runner:
        handles = [await runner.start(waits, run_id=f"ours-{i}") for i in range(20)]
        for h in handles:
            await _until_suspended(runner, h.run_id)
        async with sw.Runner(store_url) as producer:
            await producer.enqueue_many([sw.RunCall(other, i) for i in range(CROWD)], priority=5)
            await producer.signal("ours-7", "go", 7)
        async with asyncio.timeout(BOUND):
            assert await handles[7].result() == "got 7"
        still = await runner.list_runs(status="suspended", limit=50)
    assert sorted(r.id for r in still) == sorted(h.run_id for h in handles if h.run_id != "ours-7")


RELEASE: dict[str, asyncio.Event] = {}
ACTIVE = {"now": 0, "max": 0}


@sw.policy
async def blocks() -> str:
    await RELEASE["blocker"].wait()  # in-process: the run stays live here until released
    return "released"


@sw.policy
async def waits_then_works(ctx: sw.Context) -> str:
    got = await ctx.wait_for("go")
    ACTIVE["now"] += 1
    ACTIVE["max"] = max(ACTIVE["max"], ACTIVE["now"])
    await asyncio.sleep(0.05)  # a window in which a second run would show
    ACTIVE["now"] -= 1
    return f"got {got}"


async def test_runs_of_ours_claimed_behind_a_crowd_respect_concurrency(store_url: str) -> None:
    """Two runs of ours wake while the one slot is taken: once it is free,
    they run one at a time, not both at once, however many others crowd
    the ready list."""
    RELEASE["blocker"] = asyncio.Event()
    ACTIVE.update(now=0, max=0)
    async with sw.Runner(
        store_url, policies=[waits_then_works, blocks, other], poll_interval=0.05, concurrency=1
    ) as runner:
        first = await runner.start(waits_then_works, run_id="a")
        second = await runner.start(waits_then_works, run_id="b")
        await _until_suspended(runner, "a")
        await _until_suspended(runner, "b")
        blocker = await runner.start(blocks, run_id="blocker")
        async with sw.Runner(store_url) as producer:
            await producer.enqueue_many([sw.RunCall(other, i) for i in range(CROWD)], priority=5)
            await producer.signal("a", "go", 1)
            await producer.signal("b", "go", 2)
        RELEASE["blocker"].set()
        async with asyncio.timeout(BOUND):
            assert await blocker.result() == "released"
            assert [await first.result(), await second.result()] == ["got 1", "got 2"]
    assert ACTIVE["max"] == 1


def _left_running_by_a_process_killed(url: str, run_id: str) -> None:
    """A real child process starts the run, and is killed (SIGKILL) while it runs."""
    proc = subprocess.Popen(
        [sys.executable, str(APP), url, run_id], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
    finally:
        proc.kill()
        proc.wait()


async def test_a_runner_executing_runs_takes_over_a_run_a_dead_process_left(
    store_url: str,
) -> None:
    """S8: a runner that executes runs, even one that does not serve, takes
    over the runs a process on this host left running when it died."""
    _left_running_by_a_process_killed(store_url, "left")
    async with sw.Runner(store_url, policies=[left_behind, other], poll_interval=0.05) as runner:
        assert (await runner.get_run("left")).status == "running"  # its holder is gone
        assert await runner.run(other, 1) == 1  # it executes runs: it takes over as well
        async with asyncio.timeout(BOUND):
            assert await runner.outcome("left") == "finished"


@pytest.mark.parametrize("serving", [False, True], ids=["executing", "serving"])
async def test_a_run_of_ours_resumes_whatever_queues_the_runner_takes(
    store_url: str, serving: bool
) -> None:
    """A runner given queues to take from still resumes its own runs that
    wait in another queue (started here, in the default queue)."""
    async with sw.Runner(
        store_url, policies=[waits], queues=["elsewhere"], serving=serving, poll_interval=0.05
    ) as runner:
        handle = await runner.start(waits, run_id="ours")
        await _until_suspended(runner, "ours")
        assert (await runner.get_run("ours")).queue == "default"
        async with sw.Runner(store_url) as producer:
            await producer.signal("ours", "go", 3)
        async with asyncio.timeout(BOUND):
            assert await handle.result() == "got 3"


async def test_a_run_of_ours_cancelled_and_pruned_elsewhere_leaves_the_others_claimable(
    store_url: str,
) -> None:
    async with sw.Runner(store_url, policies=[waits, other], poll_interval=0.05) as runner:
        gone = await runner.start(waits, run_id="gone")
        ours = await runner.start(waits, run_id="ours")
        await _until_suspended(runner, "gone")
        await _until_suspended(runner, "ours")
        async with sw.Runner(store_url) as elsewhere:
            await elsewhere.cancel("gone")  # nobody holds it: cancelled at once
            assert await elsewhere.prune(keep=0) == 1
            await elsewhere.enqueue_many([sw.RunCall(other, i) for i in range(CROWD)], priority=5)
            await elsewhere.signal("ours", "go", 4)
        async with asyncio.timeout(BOUND):
            assert await ours.result() == "got 4"
        assert gone.run_id not in [r.id for r in await runner.list_runs(limit=CROWD + 5)]


HELD: dict[str, asyncio.Event] = {}


@sw.policy
async def wakes_then_holds(ctx: sw.Context) -> str:
    got = await ctx.wait_for("go")
    await ctx.call(other, 1)  # a step after the wake: the claim's fence is written
    await HELD["after wake"].wait()  # in-process: live here while the test looks
    return f"got {got}"


async def test_a_run_of_ours_claimed_behind_a_crowd_is_held_in_our_name(store_url: str) -> None:
    """The woken run is recorded as held by this runner while it executes,
    so its heartbeats keep it and no other worker takes it over."""
    HELD["after wake"] = asyncio.Event()
    async with sw.Runner(
        store_url, policies=[wakes_then_holds, other], poll_interval=0.05
    ) as runner:
        handle = await runner.start(wakes_then_holds, run_id="held")
        await _until_suspended(runner, "held")
        async with sw.Runner(store_url) as producer:
            await producer.enqueue_many([sw.RunCall(other, i) for i in range(CROWD)], priority=5)
            await producer.signal("held", "go", 3)
        async with asyncio.timeout(BOUND):
            while len(await runner.steps("held")) < 3:  # the wait's record and the step after
                await asyncio.sleep(0.01)
        rec = await runner.get_run("held")
        assert (rec.status, rec.owner) == ("running", runner.owner)
        HELD["after wake"].set()
        async with asyncio.timeout(BOUND):
            assert await handle.result() == "got 3"


@pytest.mark.parametrize("queues", [None, ["default"]], ids=["any-queue", "given-queues"])
async def test_a_pass_reads_no_waiting_run_of_ours_by_id_while_the_ready_list_has_room(
    store_url: str, monkeypatch: pytest.MonkeyPatch, queues: list[str] | None
) -> None:
    """A runner's own waiting runs are looked up by id only when runs it may
    not take fill a claim's batch (or, serving, it skips queues where they may
    wait): with fewer of them than the batch, a pass costs its claim query,
    not a read of every run of ours that waits. Queues given to a runner that
    does not serve change nothing here."""
    async with sw.Runner(
        store_url, policies=[waits, other], poll_interval=0.02, concurrency=4, queues=queues
    ) as runner:
        ours = [await runner.start(waits, run_id=f"ours-{i}") for i in range(2)]
        for h in ours:
            await _until_suspended(runner, h.run_id)
        async with sw.Runner(store_url) as producer:  # three not ours to take: batch of 4
            await producer.enqueue_many([sw.RunCall(other, i) for i in range(3)])
        store = runner.store
        read_by_id: list[str] = []
        passes = 0
        get_runs, claim_due = store.get_runs, store.claim_due

        async def counted_get_runs(run_ids: Any) -> Any:
            read_by_id.extend(run_ids)
            return await get_runs(run_ids)

        async def counted_claim_due(*args: Any, **kwargs: Any) -> Any:
            nonlocal passes
            passes += 1
            return await claim_due(*args, **kwargs)

        monkeypatch.setattr(store, "get_runs", counted_get_runs)
        monkeypatch.setattr(store, "claim_due", counted_claim_due)
        async with asyncio.timeout(BOUND):
            while passes < 10:
                await asyncio.sleep(0.01)
        assert not {h.run_id for h in ours} & set(read_by_id)
        assert len(await runner.list_runs(status="pending")) == 3  # refused, every pass


async def test_a_backlog_larger_than_a_claim_batch_is_claimed_in_one_pass(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serving runner with room claims batch after batch in one pass of
    its loop: a backlog does not wait a poll interval for each batch."""
    backlog = CLAIM_BATCH + 36
    async with sw.Runner(store_url) as producer:
        await producer.enqueue_many([sw.RunCall(other, i) for i in range(backlog)])
    runner = sw.Runner(store_url, policies=[other], serving=True, poll_interval=60)
    store = runner.store
    claimed = 0
    claimed_by_pass: list[int] = []  # runs claimed so far, at the end of each pass
    claim_due, next_wake = store.claim_due, store.next_wake

    async def counted_claim_due(*args: Any, **kwargs: Any) -> Any:
        nonlocal claimed
        got = await claim_due(*args, **kwargs)
        claimed += len(got)
        return got

    async def counted_next_wake() -> float | None:
        claimed_by_pass.append(claimed)
        return await next_wake()

    monkeypatch.setattr(store, "claim_due", counted_claim_due)
    monkeypatch.setattr(store, "next_wake", counted_next_wake)
    async with runner:
        async with asyncio.timeout(BOUND):
            while not claimed_by_pass:
                await asyncio.sleep(0.01)
    assert claimed_by_pass[0] == backlog
