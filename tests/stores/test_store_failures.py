"""What each store does when a write, a prune or a server fails.

* SQLite: a write that fails takes its whole transaction with it (SQLite
  rolls it back itself on a full disk), and with it the step records of other
  runs batched beside it, some already acknowledged (``durability=group``).
  They are written again; if the store cannot take them, their executions
  are refused every later write, so a ledger never gets a hole (S6).
* Both stores: pruning keeps the finished children of an unfinished parent,
  whether it prunes by age or by count (S12).
* PostgreSQL: one record the server refuses for good fails alone, not the
  records of other runs that went out in the same statement (S14).

Real SQLite files and the shared PostgreSQL server (a schema per test). The
SQLite failures are real ones: ``max_page_count`` makes the file full, and a
progress handler makes SQLite interrupt a statement (SQLITE_INTERRUPT rolls
an explicit transaction back, as a failing disk would).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from tests.records import OTHER_HOST, claimed_run, step_record
from tests.stores.conftest import committed_keys, interrupt

from stalwart.core.errors import StoreError, StoreUnavailable
from stalwart.core.ledger import StepRecord
from stalwart.stores.base import Store
from stalwart.stores.sqlite import SQLiteStore


# -- SQLite, S6: a neighbour's failure neither erases nor holes a ledger --------------------------
async def test_a_neighbours_full_disk_keeps_an_acknowledged_record(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """Run y's large record meets a full file; SQLite rolls the transaction
    back, run x's acknowledged step 1 with it. It is written again: step 1 is
    committed, and x goes on without a hole."""
    x, y = await claimed_run(grouped, "x"), await claimed_run(grouped, "y")
    await grouped.record_step("x", x, step_record("1"))  # acknowledged, not yet committed
    (pages,) = grouped.db.execute("PRAGMA page_count").fetchone()
    grouped.db.execute(f"PRAGMA max_page_count = {pages + 20}")
    with pytest.raises(StoreUnavailable, match="full"):
        await grouped.record_step("y", y, step_record("1", "x" * 1_000_000))
    grouped.db.execute("PRAGMA max_page_count = 1073741823")
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    await grouped.record_step("x", x, step_record("2"))
    await grouped.finish_run("x", x, "succeeded", "3", None)
    assert sorted(await grouped.load_steps("x")) == ["1", "2"]
    assert await grouped.load_steps("y") == {}


async def test_a_neighbours_full_disk_does_not_fail_a_waiting_step(
    sqlite_store: SQLiteStore, tmp_path: Path
) -> None:
    """With ``durability=commit``, x's step waits for the commit it shares
    with y's record. y's failure must not become x's: x's step is recorded."""
    store = sqlite_store
    x, y = await claimed_run(store, "x"), await claimed_run(store, "y")
    (pages,) = store.db.execute("PRAGMA page_count").fetchone()
    store.db.execute(f"PRAGMA max_page_count = {pages + 20}")
    got_x, got_y = await asyncio.gather(
        store.record_step("x", x, step_record("1")),
        store.record_step("y", y, step_record("1", "x" * 1_000_000)),
        return_exceptions=True,
    )
    store.db.execute("PRAGMA max_page_count = 1073741823")
    assert isinstance(got_y, StoreUnavailable)
    assert isinstance(got_x, StepRecord), f"x failed with y's error: {got_x}"
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]


async def test_a_failed_group_commit_keeps_the_acknowledged_records(
    grouped: SQLiteStore, tmp_path: Path
) -> None:
    """The group commit itself fails once (SQLite interrupts it): the records
    it held were acknowledged, so they are written again, not dropped for x's
    next step to land after a hole."""
    x = await claimed_run(grouped, "x")
    await grouped.record_step("x", x, step_record("1"))
    grouped.db.set_progress_handler(interrupt(1), 1)  # the next statement: the COMMIT
    await asyncio.sleep(0.2)  # the group commit runs, fails, and writes again
    grouped.db.set_progress_handler(None, 1)
    assert committed_keys(tmp_path / "ledger.db", "x") == ["1"]
    await grouped.record_step("x", x, step_record("2"))
    await grouped.finish_run("x", x, "succeeded", "3", None)
    assert sorted(await grouped.load_steps("x")) == ["1", "2"]


async def test_an_execution_whose_records_are_lost_writes_nothing_more(
    grouped: SQLiteStore,
) -> None:
    """When the store cannot take the records again either (every statement
    fails for a while), x's acknowledged step 1 is lost. x must write no
    more under that fence: neither step 2 (a hole) nor its end (a result
    built on a step the ledger lacks). Refused as StoreUnavailable, the run
    resumes by replay, which a new claim writes normally."""
    x, y = await claimed_run(grouped, "x"), await claimed_run(grouped, "y")
    await grouped.record_step("x", x, step_record("1"))
    grouped.db.set_progress_handler(interrupt(None), 1)  # a failing disk
    with pytest.raises(StoreError):
        await grouped.record_step("y", y, step_record("1"))
    grouped.db.set_progress_handler(None, 1)  # the store answers again
    with pytest.raises(StoreUnavailable, match="resumes by replay"):
        await grouped.record_step("x", x, step_record("2"))
    with pytest.raises(StoreUnavailable):
        await grouped.suspend_run("x", x, time.time() + 60, None)
    with pytest.raises(StoreUnavailable):
        await grouped.finish_run("x", x, "succeeded", "3", None)
    assert await grouped.load_steps("x") == {}
    replay = await grouped.claim("x", OTHER_HOST, 30.0)  # our own run, not live: taken back
    assert replay is not None and replay.fence > x
    await grouped.record_step("x", replay.fence, step_record("1"))
    await grouped.record_step("x", replay.fence, step_record("2"))
    await grouped.finish_run("x", replay.fence, "succeeded", "3", None)
    assert sorted(await grouped.load_steps("x")) == ["1", "2"]


# -- both stores, S12: prune keeps what an unfinished parent needs ------------------------------
@pytest.mark.parametrize("by", ["age", "count"])
async def test_prune_keeps_the_finished_children_of_an_unfinished_parent(
    store: Store, by: str
) -> None:
    """The children finished; their parent, suspended, reads their outcomes
    when it resumes. Pruning (by age or by count) removes only the finished
    run nobody needs."""
    await claimed_run(store, "parent")
    await store.suspend_run("parent", 1, None, "stalwart.children:parent~1/")
    for i in range(2):
        kid = f"parent~1/{i}"
        fence = await claimed_run(store, kid, parent_id="parent")
        await store.finish_run(kid, fence, "succeeded", "1", None)
    await store.finish_run("alone", await claimed_run(store, "alone"), "succeeded", "1", None)
    if by == "age":
        pruned = await store.prune(older_than=time.time() + 60)
    else:
        pruned = await store.prune(keep=0)
    assert pruned == 1
    assert await store.get_run("alone") is None
    for i in range(2):
        child = await store.get_run(f"parent~1/{i}")
        assert child is not None and child.status == "succeeded"


# -- PostgreSQL, S14: one bad record fails alone ------------------------------------------------
async def test_a_large_batch_with_one_bad_record_records_all_the_others(
    store_url: str, store: Store
) -> None:
    """Twenty runs record a step at once: the first goes out alone, the
    other nineteen together (as arrays). One holds a NUL, which PostgreSQL
    refuses for good: that record fails with a plain StoreError naming it
    (the run fails, no retry), and every other one is recorded."""
    if not store_url.startswith("postgresql"):
        pytest.skip("SQLite stores a NUL: nothing to refuse")
    ids = [f"r{i:02}" for i in range(20)]
    fences = {run_id: await claimed_run(store, run_id) for run_id in ids}
    bad = "r13"
    outcomes = await asyncio.gather(
        *(
            store.record_step(r, fences[r], step_record("1", name="bad\x00" if r == bad else "p"))
            for r in ids
        ),
        return_exceptions=True,
    )
    by_run = dict(zip(ids, outcomes, strict=True))
    failed = by_run.pop(bad)
    assert type(failed) is StoreError, failed
    assert "run 'r13': step 1 cannot be recorded" in str(failed)
    assert all(isinstance(o, StepRecord) for o in by_run.values()), by_run
    for run_id in by_run:
        assert list(await store.load_steps(run_id)) == ["1"]
    assert await store.load_steps(bad) == {}
