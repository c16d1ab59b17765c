"""durability=group and a crash of the server: a ledger never gets a hole (S6).

With ``durability=group`` the step connection commits asynchronously, so a
crash of the PostgreSQL server loses the records acknowledged in its last
moments. That is allowed for a suffix; what must never happen is a run that
goes on recording after the crash, leaving acknowledged-then-lost records in
the middle of its ledger, and finishing on it. These tests crash a private,
throwaway server (``pg_ctl stop -m immediate``, then start: crash recovery),
never the shared one; its WAL writer is slowed down so the crash does lose
what was acknowledged last.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections import Counter
from typing import Any

import pytest
from tests.durable._pg_cluster import PrivateCluster, pg_cluster  # noqa: F401
from tests.records import claimed_run, step_record

import stalwart as sw
from stalwart.core.errors import StaleLeaseError, StoreUnavailable
from stalwart.core.ledger import StepRecord

if not os.environ.get("CI"):
    pytest.importorskip("psycopg")

from stalwart.stores.postgres import PostgresStore

A = "host-a:1:a"


def _url(cluster: PrivateCluster, **options: Any) -> str:
    query = "&".join(
        f"{k}={v}" for k, v in {"schema": f"s_{uuid.uuid4().hex[:10]}", **options}.items()
    )
    return f"{cluster.url}?{query}"


def _step(key: str) -> StepRecord:
    return step_record(key, f'"{key}"', args="[]", started_at=1.0, finished_at=2.0)


async def _record(store: PostgresStore, run_id: str, fence: int, keys: list[str]) -> None:
    for key in keys:
        assert (await store.record_step(run_id, fence, _step(key))).output == f'"{key}"'


async def test_an_execution_that_may_have_lost_records_in_a_crash_stops(
    pg_cluster: PrivateCluster,  # noqa: F811
) -> None:
    store = PostgresStore.from_url(_url(pg_cluster, durability="group", retry_for=30))
    await store.open()
    try:
        fence = await claimed_run(store, "a", owner=A)
        await _record(store, "a", fence, ["1", "2"])
        # A clean restart loses nothing: the execution goes on.
        await asyncio.to_thread(pg_cluster.restart)
        await _record(store, "a", fence, ["3", "4"])
        assert sorted(await store.load_steps("a")) == ["1", "2", "3", "4"]

        fence_b = await claimed_run(store, "b", owner=A)  # holds nothing unflushed
        fence_c = await claimed_run(store, "c", owner=A)
        await _record(store, "c", fence_c, ["1"])
        # Acknowledged, and (with no synchronous commit after them, and a
        # slow WAL writer) most likely still unflushed when the server dies.
        await _record(store, "a", fence, ["5", "6"])
        await asyncio.to_thread(pg_cluster.crash)

        # "a" acknowledged records the crash may have lost: whatever it
        # writes next would come after a hole, so each write is refused as
        # transient (its runner drops the run and resumes it by replay).
        for key in ("7", "6"):
            with pytest.raises(StoreUnavailable, match="crashed or failed over"):
                await store.record_step("a", fence, _step(key))
        with pytest.raises(StoreUnavailable, match="crashed or failed over"):
            await store.finish_run("a", fence, "succeeded", "1", None)
        # "c" learns it on finishing, though its first write after the
        # crash is the finish: its result must not rest on lost records.
        with pytest.raises(StoreUnavailable, match="crashed or failed over"):
            await store.finish_run("c", fence_c, "succeeded", "1", None)
        # "b" had nothing at risk.
        await _record(store, "b", fence_b, ["1"])

        # The next execution replays what survived, a prefix, and goes on.
        again = await store.claim("a", A, 60.0)
        assert again is not None and again.fence == fence + 1
        survived = sorted(await store.load_steps("a"))
        assert survived == ["1", "2", "3", "4", "5", "6"][: len(survived)]
        assert len(survived) >= 4  # flushed by the clean restart and the claims after
        await _record(store, "a", again.fence, [k for k in "1234567" if k not in survived])
        await store.finish_run("a", again.fence, "succeeded", "1", None)
        assert sorted(await store.load_steps("a")) == ["1", "2", "3", "4", "5", "6", "7"]
    finally:
        await store.close()


async def test_a_replaced_writers_refusal_leaves_the_new_owners_records_at_risk(
    pg_cluster: PrivateCluster,  # noqa: F811
) -> None:
    store = PostgresStore.from_url(_url(pg_cluster, durability="group", retry_for=30))
    await store.open()
    try:
        old = await claimed_run(store, "a", owner=A)
        await _record(store, "a", old, ["1"])
        claimed = await store.claim("a", A, 60.0)  # taken over (its commit flushes "1")
        assert claimed is not None
        new = claimed.fence
        await _record(store, "a", new, ["2", "3"])  # acknowledged, maybe not flushed
        # The replaced writer tries once more and is refused; that must not
        # make this store forget what the new owner has at risk.
        with pytest.raises(StaleLeaseError, match="is stale"):
            await store.record_step("a", old, _step("4"))
        await asyncio.to_thread(pg_cluster.crash)
        with pytest.raises(StoreUnavailable, match="crashed or failed over"):
            await store.record_step("a", new, _step("4"))
    finally:
        await store.close()


async def test_runs_caught_by_a_crash_finish_with_whole_ledgers(
    pg_cluster: PrivateCluster,  # noqa: F811
) -> None:
    """End to end: a runner in group mode, the server crashes mid-run; every
    run still succeeds, and its ledger holds every step it took (a run
    that went on past lost records would finish with holes)."""
    n_steps = 30
    executed: Counter[tuple[str, int]] = Counter()
    going = asyncio.Event()

    @sw.policy
    async def tick(ctx: sw.Context, i: int) -> int:
        executed[ctx.run_id, i] += 1
        if sum(executed.values()) >= 20:
            going.set()
        await asyncio.sleep(0.01)
        return i

    @sw.policy
    async def chain(ctx: sw.Context, n: int) -> int:
        total = 0
        for i in range(n):
            total += await tick(i)
        return total

    url = _url(pg_cluster, durability="group", retry_for=30)
    ids = [f"chain-{i}" for i in range(4)]
    async with sw.Runner(url, policies=[chain], poll_interval=0.05) as runner:
        handles = [await runner.start(chain, n_steps, run_id=run_id) for run_id in ids]
        await asyncio.wait_for(going.wait(), 60)
        await asyncio.to_thread(pg_cluster.crash)
        results = [await h.result(timeout=90) for h in handles]
        assert results == [sum(range(n_steps))] * len(ids)
        for run_id in ids:
            recorded = sorted(
                json.loads(s.output)
                for s in await runner.steps(run_id)
                if s.name.endswith("tick") and s.output is not None
            )
            assert recorded == list(range(n_steps)), run_id
            assert all(executed[run_id, i] >= 1 for i in range(n_steps))
