"""``claim_due(versions=..., fresh=...)``: a store hands a worker the runs its
code can continue even when a backlog of another version's runs comes first,
and leaves new runs out when it may not start them. Every store: memory, a
real SQLite file, real PostgreSQL (its one-read pass and its full pass)."""

from __future__ import annotations

import time

import pytest

from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store

BACKLOG = 100


@pytest.fixture
def store(any_store: Store) -> Store:
    return any_store


def _any(rec: RunRecord) -> bool:
    return True


async def _backlog(store: Store) -> None:
    """Started runs of code version v1, every one ahead: higher priority, older."""
    old = time.time() - 3600
    await store.create_runs(
        [
            RunRecord(
                f"a{i:03}", "p", "{}", priority=5, created_at=old + i, fence=1, code_version="v1"
            )
            for i in range(BACKLOG)
        ]
    )


async def test_a_worker_takes_its_versions_run_behind_a_backlog_of_another(store: Store) -> None:
    await _backlog(store)
    await store.create_runs([RunRecord("mine", "p", "{}", fence=1, code_version="v2")])
    got = await store.claim_due("w:1:x", 60, 1, _any, versions=["v2"])
    assert [r.id for r in got] == ["mine"]
    assert await store.claim_due("w:2:x", 60, 10, _any, versions=["v2"]) == []  # none of v1


async def test_new_cleared_and_unversioned_runs_pass_the_filter(store: Store) -> None:
    await _backlog(store)
    await store.create_runs(
        [
            RunRecord("new", "p", "{}", code_version="v1"),  # never started: any code
            RunRecord("cleared", "p", "{}", fence=1, code_version="v1"),
            RunRecord("before", "p", "{}", fence=1),  # from before versions were kept
        ]
    )
    await store.clear_run("cleared", ["v2"])
    got = await store.claim_due("w:1:x", 60, 10, _any, versions=["v2"])
    assert sorted(r.id for r in got) == ["before", "cleared", "new"]


async def test_a_worker_that_may_not_start_new_runs_reads_past_them(store: Store) -> None:
    old = time.time() - 3600
    await store.create_runs(
        [RunRecord(f"n{i:03}", "p", "{}", priority=5, created_at=old) for i in range(BACKLOG)]
    )
    await store.create_runs([RunRecord("woken", "p", "{}", fence=1, code_version="v1")])
    got = await store.claim_due("w:1:x", 60, 1, _any, versions=["v1"], fresh=False)
    assert [r.id for r in got] == ["woken"]
