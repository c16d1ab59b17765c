"""SQLite's group commit (S6), decided without asyncio's private queue.

* Steps that finish together share a commit: a ``gather`` of 200 steps
  costs a handful of commits, not 200.
* A step's caller resumes only once its record is committed (another
  connection sees it), also when it commits inline, step after step.
* Two runs stepping side by side both go on (neither starves the other).
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from tests.records import claimed_run, step_record

from stalwart.core.ledger import RunRecord, StepRecord
from stalwart.stores.sqlite import SQLiteStore


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> SQLiteStore:
    return sqlite_store


def _step(key: str) -> StepRecord:
    return step_record(key, "null", name="noop", args="[]", started_at=0.0)


def _commits(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store.db.set_trace_callback(lambda sql: seen.append(sql) if sql == "COMMIT" else None)
    return seen


async def test_steps_that_finish_together_share_a_commit(store: SQLiteStore) -> None:
    fence = await claimed_run(store, "r")
    commits = _commits(store)
    gate = asyncio.Event()

    async def step(i: int) -> None:
        await gate.wait()  # every step becomes ready in the same turn of the loop
        await store.record_step("r", fence, _step(str(i)))

    tasks = [asyncio.create_task(step(i)) for i in range(200)]
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(*tasks)
    assert len(await store.load_steps("r")) == 200
    assert len(commits) <= 3, len(commits)  # the first inline, the rest as one batch


async def test_a_step_returns_only_once_its_record_is_committed(
    store: SQLiteStore, tmp_path: Path
) -> None:
    fence = await claimed_run(store, "r")
    other = sqlite3.connect(tmp_path / "ledger.db")
    try:
        for i in range(50):  # inline commits, and every few ms a deferred one
            await store.record_step("r", fence, _step(str(i)))
            (n,) = other.execute("SELECT count(*) FROM steps WHERE run_id = 'r'").fetchone()
            assert n == i + 1
    finally:
        other.close()


async def test_two_runs_stepping_side_by_side_both_progress(store: SQLiteStore) -> None:
    fences = {run_id: await claimed_run(store, run_id) for run_id in ("a", "b")}
    done: list[str] = []

    async def run(run_id: str) -> None:
        for i in range(300):
            await store.record_step(run_id, fences[run_id], _step(str(i)))
            done.append(run_id)

    await asyncio.gather(run("a"), run("b"))
    assert len(await store.load_steps("a")) == len(await store.load_steps("b")) == 300
    # They take turns: neither runs ahead while the other waits.
    for i in range(0, 600, 50):
        assert set(done[i : i + 50]) == {"a", "b"}, done[i : i + 50]


async def _holding_a_batch(path: Path, delay: float) -> SQLiteStore:
    """A store whose step record waits in an open transaction for ``delay``
    seconds (``durability=group``): it holds the file's write lock until then."""
    holder = SQLiteStore(path, durability="group", group_delay=delay)
    await holder.open()
    fence = await claimed_run(holder, "held")
    await holder.record_step("held", fence, _step("0"))
    assert holder.db.in_transaction
    return holder


@pytest.mark.parametrize("doing", ["open", "write"])
async def test_a_second_store_in_the_same_process_waits_without_blocking_the_loop(
    tmp_path: Path, doing: str
) -> None:
    """Two stores on one file in one process (a runner and the web app, say):
    while one holds the write lock until its scheduled commit, the other's
    write (or its opening of the file) waits for the lock without stopping the
    event loop, so that commit can run, and then goes through."""
    path = tmp_path / "ledger.db"
    other = SQLiteStore(path, busy_timeout=5.0)
    if doing == "write":
        await other.open()
    holder = await _holding_a_batch(path, 0.2)
    try:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        if doing == "open":
            await other.open()
        await other.create_run(RunRecord("after", "p", "{}"))
        ticker.cancel()
        assert not holder.db.in_transaction  # its commit ran meanwhile
        assert ticks >= 5  # the loop went on while the second store waited
        assert (await other.get_run("after")) is not None
        assert [s.key for s in (await other.load_steps("held")).values()] == ["0"]
    finally:
        await holder.close()
        await other.close()
