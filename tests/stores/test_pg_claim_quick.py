"""A claim pass in one read while no queue has limits (issue 17, B6 and
B10): it must honour limits set since the last pass (by this process or
another), find the runs of a process of this host that has just exited, and
cancel abandoned runs asked to stop, as the full pass does.

Real PostgreSQL (``STALWART_TEST_PG``), a schema of this module's own.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.stores.base import this_host
from stalwart.stores.postgres import PostgresStore


@pytest.fixture
def store(pg_store: PostgresStore) -> PostgresStore:
    return pg_store


@pytest.fixture
def other(pg_other_store: PostgresStore) -> PostgresStore:
    return pg_other_store


def _q() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def _runs(store: PostgresStore, queue: str, n: int) -> list[str]:
    ids = [f"r-{uuid.uuid4().hex[:12]}" for _ in range(n)]
    await store.create_runs([RunRecord(i, "p", "{}", queue=queue) for i in ids])
    return ids


def _all(rec: RunRecord) -> bool:
    """Every run but our own live ones (as a worker's accept: those run here)."""
    return rec.status != "running" or not rec.owner or not rec.owner.startswith("w:")


async def test_a_limit_set_elsewhere_after_a_quick_pass_is_honoured(
    store: PostgresStore, other: PostgresStore
) -> None:
    q = _q()
    await _runs(store, q, 1)
    assert len(await store.claim_due("w:1:a", 30, 10, _all, [q])) == 1  # no limits: quick
    await other.set_queue(q, concurrency=2)  # another process; this store has not seen it
    await _runs(store, q, 5)
    got = await store.claim_due("w:1:a", 30, 10, _all, [q])
    assert len(got) == 1  # 2 at most running, one already is
    await other.set_queue(q)  # limits lifted: passes go back to the quick way
    got = await store.claim_due("w:1:a", 30, 10, _all, [q])
    assert len(got) == 4


async def test_a_rate_limit_set_elsewhere_is_honoured(
    store: PostgresStore, other: PostgresStore
) -> None:
    q = _q()
    assert await store.claim_due("w:1:a", 30, 10, _all, [q]) == []  # quick, nothing there
    await other.set_queue(q, rate=0.001)  # one token in the bucket
    await _runs(store, q, 3)
    assert len(await store.claim_due("w:1:a", 30, 10, _all, [q])) == 1


async def test_a_limit_on_an_unserved_queue_does_not_hold_back_others(
    store: PostgresStore, other: PostgresStore
) -> None:
    q, elsewhere = _q(), _q()
    await other.set_queue(elsewhere, concurrency=1)
    await _runs(store, q, 3)
    assert len(await store.claim_due("w:1:a", 30, 10, _all, [q])) == 3


async def test_the_runs_of_a_process_of_this_host_that_just_exited_are_taken(
    store: PostgresStore,
) -> None:
    q = _q()
    assert await store.claim_due(f"{this_host()}:{os.getpid()}:me", 30, 10, _all, [q]) == []
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await child.wait()  # a pid that no longer runs (reaped)
    gone = f"{this_host()}:{child.pid}:gone"
    (rid,) = await _runs(store, q, 1)
    assert await store.claim(rid, gone, 300) is not None  # a long lease: only death frees it
    got = await store.claim_due(f"{this_host()}:{os.getpid()}:me", 30, 10, _all, [q])
    assert [r.id for r in got] == [rid]
    assert got[0].fence == 2


async def test_a_live_holder_of_this_host_keeps_its_runs(store: PostgresStore) -> None:
    q = _q()
    (rid,) = await _runs(store, q, 1)
    live = f"{this_host()}:{os.getppid()}:alive"  # the parent of this test process
    assert await store.claim(rid, live, 300) is not None
    assert await store.claim_due(f"{this_host()}:{os.getpid()}:me", 30, 10, _all, [q]) == []


async def test_an_abandoned_run_asked_to_stop_is_cancelled_by_a_quick_pass(
    store: PostgresStore,
) -> None:
    q = _q()
    a, b = await _runs(store, q, 2)
    for rid in (a, b):
        assert await store.claim(rid, "far-host:1:x", 0.001) is not None
    await store.request_cancel(b)
    got = await store.claim_due("here:2:y", 30, 10, _all, [q])
    assert [r.id for r in got] == [a]
    rec = await store.get_run(b)
    assert rec is not None and rec.status == "cancelled"


async def test_accept_sees_each_run_once_a_pass(store: PostgresStore, other: PostgresStore) -> None:
    """A pass that starts over the full way (limits found) has not asked
    ``accept`` yet: a worker counting refusals counts each run once."""
    q = _q()
    assert await store.claim_due("w:1:a", 30, 10, _all, [q]) == []  # quick from now on
    await other.set_queue(q, concurrency=5)
    ids = await _runs(store, q, 3)
    seen: list[str] = []

    def refuse(rec: RunRecord) -> bool:
        seen.append(rec.id)
        return False

    assert await store.claim_due("w:1:a", 30, 10, refuse, [q]) == []
    assert sorted(seen) == sorted(ids)
