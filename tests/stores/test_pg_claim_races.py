"""The PostgreSQL claim pass made in one read, under races and outages.

Two stores on one schema stand for two worker processes (each its own pool
and state). Real PostgreSQL, a schema of this module's own; the store's
connections are cut from the server side for the outage.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest
from tests.conftest import PG_URL

from stalwart.core.ledger import RunRecord
from stalwart.stores.postgres import PostgresStore

APP = f"h8-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def pg_store_options() -> dict[str, object]:
    return {"retry_for": 10, "application_name": APP}


@pytest.fixture
def other(pg_other_store: PostgresStore) -> PostgresStore:
    return pg_other_store


def _q() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


async def _runs(
    store: PostgresStore, queue: str, n: int, priority: int = 0, wake_at: float | None = None
) -> list[str]:
    ids = [f"r-{uuid.uuid4().hex[:12]}" for _ in range(n)]
    await store.create_runs(
        [RunRecord(i, "p", "{}", queue=queue, priority=priority, wake_at=wake_at) for i in ids]
    )
    return ids


def _yes(rec: RunRecord) -> bool:
    return rec.status != "running" or not (rec.owner or "").startswith("w")


async def test_two_workers_racing_never_claim_one_run_twice(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    """S8: many passes of two workers at once, on the quick path, some runs
    abandoned (lease expired) among them: each run goes to one worker."""
    q = _q()
    ids = await _runs(pg_store, q, 60)
    for rid in ids[:10]:  # abandoned by a worker elsewhere
        assert await pg_store.claim(rid, "far:1:x", 0.001) is not None
    await asyncio.sleep(0.01)
    got: dict[str, list[str]] = {"a": [], "b": []}

    async def worker(store: PostgresStore, name: str) -> None:
        for _ in range(20):
            batch = await store.claim_due(f"w{name}:1:x", 60, 3, _yes, [q])
            got[name].extend(r.id for r in batch)

    await asyncio.gather(worker(pg_store, "a"), worker(other, "b"))
    both = got["a"] + got["b"]
    assert len(both) == len(set(both)) == 60
    assert not set(got["a"]) & set(got["b"])
    for rid in ids[:10]:
        rec = await pg_store.get_run(rid)
        assert rec is not None and rec.fence == 2  # taken over once, fenced


async def test_priorities_and_delayed_starts_on_the_quick_path(pg_store: PostgresStore) -> None:
    q = _q()
    low = await _runs(pg_store, q, 2, priority=-5)
    later = await _runs(pg_store, q, 1, priority=100, wake_at=time.time() + 3600)
    high = await _runs(pg_store, q, 2, priority=7)
    first = await pg_store.claim_due("w:1:a", 60, 2, _yes, [q])
    assert sorted(r.id for r in first) == sorted(high)
    rest = await pg_store.claim_due("w:1:a", 60, 10, _yes, [q])
    assert sorted(r.id for r in rest) == sorted(low)  # the delayed one is not due
    rec = await pg_store.get_run(later[0])
    assert rec is not None and rec.status == "pending"


async def test_all_queues_honour_a_limit_set_elsewhere(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    """queues=None serves every queue: a limit anywhere sends the pass the
    full way, and is honoured there."""
    q = _q()
    assert await pg_store.claim_due("w:1:a", 60, 10, lambda r: False, None) == []
    await other.set_queue(q, concurrency=1)
    await _runs(pg_store, q, 4)
    mine = [r for r in await pg_store.claim_due("w:1:a", 60, 100, _yes, None) if r.queue == q]
    assert len(mine) == 1
    await other.set_queue(q)


async def test_a_limit_lifted_then_set_again_is_honoured_each_time(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    """The flag going stale both ways: limited, lifted, limited again."""
    q = _q()
    await other.set_queue(q, concurrency=1)
    await _runs(pg_store, q, 6)
    assert len(await pg_store.claim_due("w:1:a", 60, 10, _yes, [q])) == 1
    await other.set_queue(q)
    assert len(await pg_store.claim_due("w:1:a", 60, 2, _yes, [q])) == 2  # quick again
    await other.set_queue(q, concurrency=4)  # 3 running: room for one
    assert len(await pg_store.claim_due("w:1:a", 60, 10, _yes, [q])) == 1
    await other.set_queue(q)


async def test_a_cut_connection_mid_stream_is_retried_without_a_double_claim(
    pg_store: PostgresStore, other: PostgresStore
) -> None:
    """A store outage: the server drops every connection of this store
    between passes; the next pass reconnects and claims each run once."""
    import psycopg

    q = _q()
    ids = await _runs(pg_store, q, 8)
    first = await pg_store.claim_due("w:1:a", 60, 3, _yes, [q])
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        cut = await (
            await admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                (APP,),
            )
        ).fetchall()
    assert cut and all(ok for (ok,) in cut)  # the store's connections were there, and cut
    second = await pg_store.claim_due("w:1:a", 60, 3, _yes, [q])
    third = await other.claim_due("w:2:b", 60, 10, _yes, [q])
    every = [r.id for r in first + second + third]
    assert sorted(every) == sorted(ids) and len(set(every)) == 8


async def test_a_worker_refusing_most_runs_still_gets_the_one_it_can_run(
    pg_store: PostgresStore,
) -> None:
    q = _q()
    await _runs(pg_store, q, 6, priority=5)  # another policy's backlog, first in line
    mine = f"r-{uuid.uuid4().hex[:12]}"
    await pg_store.create_runs([RunRecord(mine, "mine", "{}", queue=q)])
    got = await pg_store.claim_due(
        "w:1:a", 60, 1, lambda r: r.policy == "mine", [q], policies=["mine"]
    )
    assert [r.id for r in got] == [mine]


_HOLDER = """
import asyncio, os, sys
from stalwart.stores.base import this_host
from stalwart.stores.postgres import PostgresStore

async def main() -> None:
    store = PostgresStore.from_url(sys.argv[1])
    await store.open()
    rec = await store.claim(sys.argv[2], f"{this_host()}:{os.getpid()}:held", 3600)
    assert rec is not None
    print("held", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


async def test_a_sigkilled_holder_of_this_host_is_found_by_a_quick_pass(
    pg_store: PostgresStore, pg_schema: str, pg_url: Callable[..., str]
) -> None:
    """A real worker process of this host holds a run on an hour's lease
    and is killed (SIGKILL): a pass that saw it alive, then one after its
    death, take the run at once (no waiting for the lease), fenced."""
    import os
    import signal
    import sys

    from stalwart.stores.base import this_host

    q = _q()
    (rid,) = await _runs(pg_store, q, 1)
    me = f"{this_host()}:{os.getpid()}:me"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLDER, pg_url(pg_schema), rid, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), 60) == b"held\n"
        assert await pg_store.claim_due(me, 60, 10, _yes, [q]) == []  # alive: its run stays
        os.kill(proc.pid, signal.SIGKILL)
        await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    got = await pg_store.claim_due(me, 60, 10, _yes, [q])
    assert [r.id for r in got] == [rid]
    assert got[0].fence == 2
