"""Who executes which run (S8): what ``claim`` and ``claim_due`` hand out.

Both stores, a real SQLite file and the real PostgreSQL server; what
becomes of an abandoned run asked to cancel, every store, memory included.

* A holder on this host that has exited frees its runs at once, before its
  lease runs out, through ``claim`` and through ``claim_due``.
* An abandoned run that was asked to cancel ends ``cancelled`` and is never
  handed out to execute again, whichever worker's pass reads it: one
  without its policy, one whose ``accept`` refuses it. Only a run the
  caller holds and executes itself is left to its heartbeat.
* ``claim_due`` returns at most ``limit`` runs, the highest priority first
  (oldest first within a priority), and never a run of a policy the caller
  lacks, abandoned or ready.
"""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.stores import open_store
from stalwart.stores.base import CANCELLED_ERROR, Store, this_host

ME = f"{this_host()}:{os.getpid()}:me"  # this process: alive
FAR = "elsewhere:1:far"  # another host: only its lease frees its runs


async def _exited_holder() -> str:
    """The owner name of a process of this host that has exited."""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()
    return f"{this_host()}:{child.pid}:gone"


def _any(rec: RunRecord) -> bool:
    """A worker's accept: every run but those it executes already."""
    return rec.status != "running" or rec.owner != ME


async def _held(store: Store, run_id: str, owner: str, lease: float, **fields: object) -> int:
    await store.create_run(RunRecord(run_id, "p", "{}", **fields))  # type: ignore[arg-type]
    rec = await store.claim(run_id, owner, lease)
    assert rec is not None
    return rec.fence


async def test_claim_takes_a_run_whose_holder_on_this_host_has_exited(store: Store) -> None:
    gone = await _exited_holder()
    first = await _held(store, "r", gone, 300.0)  # a long lease: only its death frees it
    got = await store.claim("r", ME, 30.0)
    assert got is not None
    assert (got.owner, got.status, got.fence) == (ME, "running", first + 1)


async def test_claim_leaves_a_run_whose_holder_is_alive(store: Store) -> None:
    await _held(store, "r", FAR, 300.0)
    assert await store.claim("r", ME, 30.0) is None
    rec = await store.get_run("r")
    assert rec is not None and rec.owner == FAR


async def test_claim_due_leaves_a_run_whose_holder_on_this_host_is_alive(store: Store) -> None:
    # Another live process of this host holds a long lease: neither its
    # death nor its lease frees the run, so no pass takes it.
    alive = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)"
    )
    try:
        await _held(store, "r", f"{this_host()}:{alive.pid}:alive", 300.0)
        assert await store.claim_due(ME, 30.0, 10, _any) == []
        rec = await store.get_run("r")
        assert rec is not None and rec.owner == f"{this_host()}:{alive.pid}:alive"
    finally:
        alive.kill()
        await alive.wait()


async def test_claim_due_takes_a_run_whose_holder_on_this_host_has_exited(store: Store) -> None:
    gone = await _exited_holder()
    first = await _held(store, "r", gone, 300.0)
    got = await store.claim_due(ME, 30.0, 10, _any)
    assert [(r.id, r.owner, r.fence) for r in got] == [("r", ME, first + 1)]


async def test_an_abandoned_run_asked_to_cancel_ends_cancelled_unexecuted(store: Store) -> None:
    fence = await _held(store, "stop", FAR, 0.5)
    await _held(store, "go", FAR, -1.0)
    await store.request_cancel("stop")  # asked while its holder was live
    await asyncio.sleep(0.6)  # then the holder vanished: its lease ran out
    got = await store.claim_due(ME, 30.0, 10, _any)
    assert [r.id for r in got] == ["go"]
    rec = await store.get_run("stop")
    assert rec is not None
    assert (rec.status, rec.error, rec.owner) == ("cancelled", CANCELLED_ERROR, None)
    assert rec.fence == fence
    assert await store.claim("stop", ME, 30.0) is None  # never handed out again
    assert await store.claim_due(ME, 30.0, 10, _any) == []


async def test_claim_due_returns_at_most_limit_runs(store: Store) -> None:
    for i in range(3):
        await _held(store, f"a{i}", FAR, -1.0)  # abandoned
    await store.create_runs([RunRecord(f"p{i}", "p", "{}") for i in range(4)])
    first = await store.claim_due(ME, 30.0, 2, _any)
    assert len(first) == 2
    second = await store.claim_due(ME, 30.0, 4, _any)
    assert len(second) == 4
    assert not {r.id for r in first} & {r.id for r in second}


async def test_claim_due_takes_the_highest_priority_first(store: Store) -> None:
    await store.create_runs(
        [RunRecord(f"low{i}", "p", "{}", created_at=float(i)) for i in range(6)]
        + [RunRecord("high-late", "p", "{}", priority=5, created_at=20.0)]
        + [RunRecord("high-early", "p", "{}", priority=5, created_at=10.0)]
        + [RunRecord("top", "p", "{}", priority=9, created_at=30.0)]
    )
    got = await store.claim_due(ME, 30.0, 3, _any)
    assert [r.id for r in got] == ["top", "high-early", "high-late"]
    got = await store.claim_due(ME, 30.0, 2, _any)
    assert [r.id for r in got] == ["low0", "low1"]


async def test_claim_due_leaves_runs_of_a_policy_the_caller_lacks(store: Store) -> None:
    await _held(store, "theirs-abandoned", FAR, -1.0)  # policy "p"
    await store.create_run(RunRecord("theirs-ready", "p", "{}"))
    await store.create_run(RunRecord("mine", "q", "{}"))
    got = await store.claim_due(ME, 30.0, 10, _any, policies=["q"])
    assert [r.id for r in got] == ["mine"]
    for run_id in ("theirs-abandoned", "theirs-ready"):
        rec = await store.get_run(run_id)
        assert rec is not None and rec.owner != ME


async def test_claim_due_skips_the_runs_accept_refuses_and_takes_the_next(store: Store) -> None:
    await _held(store, "refused-abandoned", FAR, -1.0)
    await _held(store, "abandoned", FAR, -1.0)
    await store.create_runs(
        [
            RunRecord("refused-ready", "p", "{}", priority=9),
            RunRecord("ready", "p", "{}", priority=1),
        ]
    )
    seen: list[str] = []

    def accept(rec: RunRecord) -> bool:
        seen.append(rec.id)
        return _any(rec) and not rec.id.startswith("refused")

    got = await store.claim_due(ME, 30.0, 10, accept)
    assert sorted(r.id for r in got) == ["abandoned", "ready"]
    assert {"refused-abandoned", "refused-ready"} <= set(seen)
    for run_id in ("refused-abandoned", "refused-ready"):
        rec = await store.get_run(run_id)
        assert rec is not None and rec.owner != ME


async def test_claim_due_serves_only_the_queues_it_is_given(store: Store) -> None:
    await store.create_runs(
        [RunRecord(f"{q}-run", "p", "{}", queue=q) for q in ("mail", "chat", "batch")]
    )
    got = await store.claim_due(ME, 30.0, 10, _any, ["mail", "chat"])
    assert sorted(r.id for r in got) == ["chat-run", "mail-run"]


async def test_an_abandoned_run_of_a_full_queue_is_taken_over(store: Store) -> None:
    """The queue's one slot is the abandoned run's own: taking it over
    starts nothing new, so the limit does not hold it back; a pending run of
    that queue still waits."""
    await store.set_queue("one", concurrency=1)
    await _held(store, "abandoned", FAR, -1.0, queue="one")
    await store.create_run(RunRecord("waiting", "p", "{}", queue="one"))
    got = await store.claim_due(ME, 30.0, 10, _any, ["one"])
    assert [r.id for r in got] == ["abandoned"]
    rec = await store.get_run("waiting")
    assert rec is not None and rec.status == "pending"


async def test_a_holder_renewing_its_lease_during_a_claim_pass_keeps_its_run(
    sqlite_url: str,
) -> None:
    """SQLite: the pass reads the run as abandoned (its lease ran out); its
    holder, another process, renews the lease before the pass claims it.
    The claim checks the lease again: the holder keeps its run."""
    import sqlite3
    import time

    store = open_store(sqlite_url)
    assert store is not None
    await store.open()
    try:
        await _held(store, "r", FAR, -1.0)
        path = sqlite_url.removeprefix("sqlite:///")

        def renewed_meanwhile(rec: RunRecord) -> bool:
            other = sqlite3.connect(path, timeout=10)
            try:
                with other:
                    other.execute(
                        "UPDATE runs SET lease_expires_at = ? WHERE id = ?",
                        (time.time() + 60, rec.id),
                    )
            finally:
                other.close()
            return True

        assert await store.claim_due(ME, 30.0, 10, renewed_meanwhile) == []
        rec = await store.get_run("r")
        assert rec is not None and rec.owner == FAR
    finally:
        await store.close()


async def test_a_queue_that_fills_up_does_not_hold_back_the_runs_of_others(store: Store) -> None:
    """The queue's one slot goes to its best run; its next run waits, and a
    run of another queue, lower in priority, starts in the same pass."""
    await store.set_queue("one", concurrency=1)
    await store.create_runs(
        [
            RunRecord("first", "p", "{}", queue="one", priority=9),
            RunRecord("second", "p", "{}", queue="one", priority=8),
            RunRecord("free", "p", "{}", queue="other", priority=1),
        ]
    )
    got = await store.claim_due(ME, 30.0, 10, _any)
    assert sorted(r.id for r in got) == ["first", "free"]


# An abandoned run asked to cancel, on every store, the memory one included.
# Its holder is a process of this host: alive when the cancel is asked (so
# the request only asks), then exited, so the run is abandoned at once.


async def _asked_to_cancel_then_abandoned(store: Store, run_id: str, policy: str) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)"
    )
    try:
        holder = f"{this_host()}:{child.pid}:doomed"
        await store.create_run(RunRecord(run_id, policy, "{}"))
        assert await store.claim(run_id, holder, 300.0) is not None
        asked = await store.request_cancel(run_id)
        assert asked is not None and (asked.status, asked.cancel_requested) == ("running", True)
    finally:
        child.kill()
        await child.wait()


async def _ended_cancelled(store: Store, run_id: str) -> bool:
    rec = await store.get_run(run_id)
    assert rec is not None
    return (rec.status, rec.error, rec.owner) == ("cancelled", CANCELLED_ERROR, None)


async def test_an_abandoned_run_asked_to_cancel_ends_cancelled_though_the_caller_lacks_its_policy(
    any_store: Store,
) -> None:
    """Ending it executes nothing, so a worker without the run's policy
    ends it as well as one with it: nobody else may ever claim it."""
    await _asked_to_cancel_then_abandoned(any_store, "stop", "theirs")
    assert await any_store.claim_due(ME, 30.0, 10, _any, policies=["mine"]) == []
    assert await _ended_cancelled(any_store, "stop")


async def test_an_abandoned_run_asked_to_cancel_ends_cancelled_though_accept_refuses_it(
    any_store: Store,
) -> None:
    await _asked_to_cancel_then_abandoned(any_store, "stop", "p")
    assert await any_store.claim_due(ME, 30.0, 10, lambda rec: False) == []
    assert await _ended_cancelled(any_store, "stop")


async def test_a_run_of_the_callers_own_asked_to_cancel_ends_cancelled_only_if_not_live_there(
    any_store: Store,
) -> None:
    """A run the caller holds but does not execute (a claim whose reply was
    lost) ends cancelled; one it executes (``accept`` refuses it) is left
    to its holder, which sees the request at its next heartbeat."""
    for run_id in ("lost", "live"):
        await _held(any_store, run_id, ME, 300.0)
        await any_store.request_cancel(run_id)
    got = await any_store.claim_due(ME, 30.0, 10, lambda rec: rec.id != "live")
    assert got == []
    assert await _ended_cancelled(any_store, "lost")
    live = await any_store.get_run("live")
    assert live is not None and (live.status, live.owner) == ("running", ME)
    assert (await any_store.heartbeat(ME, 30.0, ["live"])).cancel == ["live"]


async def test_a_holder_renewing_its_lease_during_a_claim_pass_keeps_its_run_asked_to_cancel(
    sqlite_store: Store, sqlite_url: str
) -> None:
    """SQLite: the pass reads a run asked to cancel as abandoned (its lease
    ran out); its holder, another process, renews the lease before the pass
    ends it. The run stays its holder's, which sees the request at its next
    heartbeat and stops the run itself."""
    import sqlite3
    import time

    path = sqlite_url.removeprefix("sqlite:///")
    await _held(sqlite_store, "first", FAR, -1.0, created_at=1.0)  # read before "stop"
    await _held(sqlite_store, "stop", FAR, -1.0, created_at=2.0)

    def write(sql: str, *params: object) -> None:
        other = sqlite3.connect(path, timeout=10)
        try:
            with other:
                other.execute(sql, params)
        finally:
            other.close()

    write("UPDATE runs SET cancel_requested = 1 WHERE id = 'stop'")  # asked while live

    def renewed_meanwhile(rec: RunRecord) -> bool:
        write("UPDATE runs SET lease_expires_at = ? WHERE id = 'stop'", time.time() + 60)
        return False

    assert await sqlite_store.claim_due(ME, 30.0, 10, renewed_meanwhile) == []
    rec = await sqlite_store.get_run("stop")
    assert rec is not None and (rec.status, rec.owner) == ("running", FAR)
    assert (await sqlite_store.heartbeat(FAR, 30.0, ["stop"])).cancel == ["stop"]


async def test_limits_no_queue_can_have_are_refused_before_anything_is_written(
    store: Store,
) -> None:
    await store.set_queue("q", concurrency=2, rate=5.0)
    for bad, says in (
        ({"concurrency": 0}, "concurrency must be at least 1"),
        ({"rate": 0.0}, "rate must be > 0"),
        ({"concurrency": 1, "rate": -1.0}, "rate must be > 0"),
    ):
        with pytest.raises(ValueError, match=says):
            await store.set_queue("q", **bad)  # type: ignore[arg-type]
