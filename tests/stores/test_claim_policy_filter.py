"""``claim_due(policies=...)``: a store hands a worker the runs of its own
policies even when a backlog of another policy's runs comes first (higher
priority, older, abandoned earlier). Every store: memory, a real SQLite file,
real PostgreSQL (its one-read pass and its full pass, with queue limits)."""

from __future__ import annotations

import asyncio
import time

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store
from stalwart.stores.sqlite import SQLiteStore

BACKLOG = 100


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def _any(rec: RunRecord) -> bool:
    return True


async def _backlog(store: Store, queue: str = "default") -> None:
    """Another policy's runs, every one ahead of a default run: higher
    priority, older."""
    old = time.time() - 3600
    await store.create_runs(
        [
            RunRecord(f"a{i:03}", "a", "{}", priority=5, created_at=old + i, queue=queue)
            for i in range(BACKLOG)
        ]
    )


async def test_a_worker_of_policy_b_takes_its_run_behind_a_backlog_of_a(store: Store) -> None:
    await _backlog(store)
    await store.create_runs([RunRecord("b", "b", "{}")])
    got = await store.claim_due("w:1:b", 60, 1, _any, policies=["b"])
    assert [r.id for r in got] == ["b"]
    rest = await store.claim_due("w:3:b", 60, 10, _any, policies=["b"])
    assert rest == []  # none of the backlog: it is not b's


async def test_no_policies_means_any_policy(store: Store) -> None:
    await _backlog(store)
    await store.create_runs([RunRecord("b", "b", "{}")])
    got = await store.claim_due("w:1:b", 60, 2, _any)
    assert [r.id for r in got] == ["a000", "a001"]  # best first, whatever the policy


async def test_the_filter_holds_under_queue_limits(store: Store) -> None:
    """A limited queue makes the PostgreSQL store take its full pass."""
    if store.ephemeral:
        pytest.skip("queue limits need a durable store")
    await store.set_queue("limited", concurrency=50)
    await _backlog(store, queue="limited")
    await store.create_runs([RunRecord("b", "b", "{}", queue="limited")])
    got = await store.claim_due("w:1:b", 60, 1, _any, ["limited"], policies=["b"])
    assert [r.id for r in got] == ["b"]


async def test_abandoned_runs_of_other_policies_do_not_crowd_ours_out(store: Store) -> None:
    """Runs whose holder's lease lapsed: the backlog is A's, the one run B's."""
    await _backlog(store)
    await store.create_runs([RunRecord("b", "b", "{}", priority=-1)])
    taken = await store.claim_due("w:2:dead", 0.001, BACKLOG + 1, _any)
    assert len(taken) == BACKLOG + 1
    await asyncio.sleep(0.01)  # the leases lapse, on the server's clock too
    got = await store.claim_due("w:1:b", 60, 1, _any, policies=["b"])
    assert [r.id for r in got] == ["b"]
    assert got[0].fence == 2  # taken over, fenced


# The claim starvation of test_pg_claim_races.py on SQLite:
# the same shape (ready runs read ``2 * limit`` at a time, ``accept`` asked
# after), the same run left behind. A real SQLite file.


async def test_a_worker_refusing_most_runs_still_gets_the_one_it_can_run(sqlite_url: str) -> None:
    store = SQLiteStore.from_url(sqlite_url)
    await store.open()
    try:
        await store.create_runs([RunRecord(f"a{i}", "theirs", "{}", priority=5) for i in range(6)])
        await store.create_runs([RunRecord("mine", "mine", "{}")])
        got = await store.claim_due("w:1:a", 60, 1, lambda r: r.policy == "mine", policies=["mine"])
        assert [r.id for r in got] == ["mine"]
    finally:
        await store.close()
