"""``claim_due(versions=..., fresh=...)``: a store hands a worker the runs its
code can continue even when a backlog of another version's runs comes first,
and leaves new runs out when it may not start them. Every store: memory, a
real SQLite file, real PostgreSQL (its one-read pass and its full pass)."""

from __future__ import annotations

import sqlite3
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


async def test_a_run_taken_and_repinned_after_it_was_read_is_not_claimed(
    sqlite_store: SQLiteStore,
) -> None:
    """Between a claim pass's read and its claim, another worker (here, another
    connection to the file) takes the run, records its version and suspends it
    due again: the pass accepted what it read, not what the run is now."""
    await sqlite_store.create_runs([RunRecord("r", "p", "{}", fence=1, code_version="v1")])

    def accept(rec: RunRecord) -> bool:
        other = sqlite3.connect(sqlite_store.path)
        other.execute(
            "UPDATE runs SET fence = fence + 1, code_version = 'v2', status = 'suspended', "
            "wake_at = ? WHERE id = 'r'",
            (time.time() - 1,),
        )
        other.commit()
        other.close()
        return rec.code_version == "v1"  # a v1 worker's verdict on what it read

    assert await sqlite_store.claim_due("w:1:v1", 60, 1, accept) == []
    rec = await sqlite_store.get_run("r")
    assert rec is not None and (rec.status, rec.code_version) == ("suspended", "v2")
