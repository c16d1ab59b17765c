"""SQLite specifics: fencing on every step write,
no write lock left behind, lost leases reported by the heartbeat, concurrent
first opens, transient versus permanent errors, pruning that keeps what an
unfinished run needs, and the queue rate limit and signal idempotency pinned
by their counts.

Every test uses a real file; the first-open test uses real processes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import re
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from tests.records import step_record

from stalwart.core.errors import RunNotFound, StaleLeaseError, StoreError, StoreUnavailable
from stalwart.core.ledger import CHILDREN_WAIT, RunRecord, StepRecord
from stalwart.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from stalwart.stores.sqlite import claims as sqlite_claims

# Owners on another host: never judged dead here, only their leases count.
A = "elsewhere:1:a"
B = "elsewhere:2:b"


@pytest.fixture
def store(sqlite_store: SQLiteStore) -> SQLiteStore:
    return sqlite_store


def _step(key: str, output: str) -> StepRecord:
    return step_record(key, output, started_at=0.0)


async def _taken_over(store: SQLiteStore, run_id: str) -> tuple[int, int]:
    """Run ``run_id`` claimed by A on a lease that has already expired, then
    taken over by B; return both fences."""
    await store.create_run(RunRecord(run_id, "p", "{}"))
    first = await store.claim(run_id, A, -1.0)
    assert first is not None
    second = await store.claim(run_id, B, 30.0)
    assert second is not None and second.fence > first.fence
    return first.fence, second.fence


def _other_writer_can_commit(path: str) -> None:
    """A second connection that will not wait takes the write lock at once."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("COMMIT")
    finally:
        other.close()


# -- fencing ---------------------------------------------------------------------


async def test_a_stale_writer_is_refused_even_where_a_record_exists(store: SQLiteStore) -> None:
    old, new = await _taken_over(store, "r")
    big = "x" * 40_000  # spilled out of the hot row
    await store.record_step("r", new, _step("1", big))

    # The replaced worker must not read the new owner's result and go on.
    with pytest.raises(StaleLeaseError):
        await store.record_step("r", old, _step("1", "stale"))
    with pytest.raises(StaleLeaseError):
        await store.record_step("r", old, _step("2", "stale"))

    # The holder still gets the first result, whole (S3).
    won = await store.record_step("r", new, _step("1", "later"))
    assert won.output == big

    # Once the run is finished nobody holds it: the holder is refused too.
    await store.finish_run("r", new, "succeeded", "1", None)
    with pytest.raises(StaleLeaseError):
        await store.record_step("r", new, _step("1", "after"))
    assert (await store.load_steps("r"))["1"].output == big


async def test_a_step_write_that_changes_nothing_leaves_the_file_unlocked(
    store: SQLiteStore,
) -> None:
    old, new = await _taken_over(store, "r")
    await store.record_step("r", new, _step("1", "1"))

    await store.record_step("r", new, _step("1", "again"))  # already recorded
    _other_writer_can_commit(store.path)

    with pytest.raises(StaleLeaseError):
        await store.record_step("r", old, _step("1", "stale"))  # refused
    _other_writer_can_commit(store.path)

    with pytest.raises(StaleLeaseError):
        await store.record_step("r", old, _step("9", "stale"))  # refused, new key
    _other_writer_can_commit(store.path)


async def test_a_step_sqlite_cannot_store_fails_permanently_and_leaves_the_file_unlocked(
    store: SQLiteStore,
) -> None:
    _, fence = await _taken_over(store, "r")
    with pytest.raises(StoreError, match="cannot be stored") as bad:
        await store.record_step("r", fence, _step("1.\ud800", "1"))  # a lone surrogate
    assert not isinstance(bad.value, StoreUnavailable)
    _other_writer_can_commit(store.path)
    assert await store.record_step("r", fence, _step("2", "2")) is not None


async def test_the_heartbeat_names_the_runs_its_owner_lost(store: SQLiteStore) -> None:
    for run_id in ("cancel", "held", "finished"):
        await store.create_run(RunRecord(run_id, "p", "{}"))
        assert await store.claim(run_id, A, 30.0) is not None
    finished = await store.get_run("finished")
    assert finished is not None
    await store.finish_run("finished", finished.fence, "succeeded", "1", None)
    await store.request_cancel("cancel")
    await _taken_over(store, "taken")

    beat = await store.heartbeat(A, 60.0, ["cancel", "held", "finished", "taken", "gone"])

    assert beat.cancel == ["cancel"]
    assert sorted(beat.lost) == ["finished", "gone", "taken"]
    taken = await store.get_run("taken")
    assert taken is not None and taken.owner == B  # the beat did not take it back


# -- opening ---------------------------------------------------------------------


def _open_each_file_with_the_others(
    paths: list[str],
    ready: multiprocessing.synchronize.Barrier,
    failures: multiprocessing.queues.Queue[str | None],
) -> None:
    """One of several processes that open each new file at the same moment."""
    try:
        with asyncio.Runner() as runner:
            runner.get_loop()  # set up before the first barrier, so the opens collide
            for path in paths:
                store = SQLiteStore(path)
                ready.wait(30)  # a sibling that died breaks it: we stop too
                try:
                    runner.run(store.open())
                    runner.run(store.close())
                except Exception as exc:
                    failures.put(f"{path}: {exc!r}")
    finally:
        failures.put(None)


def test_processes_opening_a_new_file_together_all_succeed(tmp_path: Path) -> None:
    # The race is narrow: without the fix about one trial in ten fails.
    paths = [str(tmp_path / f"new-{trial}.db") for trial in range(40)]
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Barrier(3)
    failures: multiprocessing.queues.Queue[str | None] = spawn.Queue()
    procs = [
        spawn.Process(target=_open_each_file_with_the_others, args=(paths, ready, failures))
        for _ in range(3)
    ]
    for proc in procs:
        proc.start()
    failed: list[str] = []
    finished = 0
    while finished < len(procs):  # each process reports its failures, then None
        report = failures.get(timeout=60)
        if report is None:
            finished += 1
        else:
            failed.append(report)
    for proc in procs:
        proc.join(30)
    assert failed == []
    assert [proc.exitcode for proc in procs] == [0, 0, 0]
    for path in paths:
        with sqlite3.connect(path) as db:
            versions = [v for (v,) in db.execute("SELECT version FROM stalwart_schema")]
        assert sorted(versions) == list(range(1, SCHEMA_VERSION + 1)), path  # migrated once


async def test_opening_a_new_file_another_connection_is_creating_waits(tmp_path: Path) -> None:
    # What the losing process of a concurrent first open meets: the file is
    # new and another connection is writing it. SQLite answers the switch to
    # WAL with SQLITE_BUSY at once (a lock upgrade it will not wait for).
    path = str(tmp_path / "new.db")
    creator = sqlite3.connect(path, isolation_level=None)
    creator.execute("BEGIN IMMEDIATE")
    creator.execute("CREATE TABLE theirs (x)")
    store = SQLiteStore(path)
    opening = asyncio.create_task(store.open())
    await asyncio.sleep(0.1)  # the open meets the lock and must keep trying
    creator.execute("COMMIT")
    creator.close()
    await opening
    try:
        await store.create_run(RunRecord("r", "p", "{}"))
    finally:
        await store.close()


async def test_a_failed_open_leaves_the_store_closed(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
        db.execute("INSERT INTO stalwart_schema VALUES (99)")
    store = SQLiteStore(path)
    for _ in range(2):  # a second open must not find a half-open store
        with pytest.raises(StoreError, match="newer than this Stalwart"):
            await store.open()
    with pytest.raises(StoreError, match="not open"):
        await store.get_run("x")


# -- errors ----------------------------------------------------------------------


async def test_a_locked_file_is_unavailable_not_broken(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    setup = SQLiteStore(path)
    await setup.open()
    await setup.create_run(RunRecord("r", "p", "{}"))
    claimed = await setup.claim("r", A, 30.0)
    assert claimed is not None
    await setup.close()

    impatient = SQLiteStore(path, busy_timeout=0)
    await impatient.open()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        # What a user reads: the store, that a write could not begin, and why.
        locked = rf"SQLite store '{re.escape(path)}': cannot begin a write: database is locked"
        with pytest.raises(StoreUnavailable, match=locked):
            await impatient.create_run(RunRecord("s", "p", "{}"))
        with pytest.raises(StoreUnavailable, match=locked):
            await impatient.record_step("r", claimed.fence, _step("1", "1"))
        # Opening a file already at this schema version only reads it.
        reader = SQLiteStore(path, busy_timeout=0)
        await reader.open()
        assert (await reader.get_run("r")) is not None
        await reader.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Once the lock is gone the same calls succeed: that is what a retry needs.
    await impatient.create_run(RunRecord("s", "p", "{}"))
    await impatient.record_step("r", claimed.fence, _step("1", "1"))
    await impatient.close()


async def test_usage_errors_and_broken_files_are_permanent(
    store: SQLiteStore, tmp_path: Path
) -> None:
    def permanent(exc: pytest.ExceptionInfo[StoreError]) -> bool:
        return not isinstance(exc.value, StoreUnavailable)

    await store.create_run(RunRecord("r", "p", "{}"))
    claimed = await store.claim("r", A, 30.0)
    assert claimed is not None
    await store.finish_run("r", claimed.fence, "succeeded", "1", None)
    with pytest.raises(StoreError, match="takes no signals") as finished:
        await store.send_signal("r", "go", "null")
    assert permanent(finished)
    with pytest.raises(RunNotFound):
        await store.send_signal("nope", "go", "null")
    with pytest.raises(StoreError, match="not in the store") as missing:
        await store.finish_run("nope", 1, "succeeded", "1", None)
    assert permanent(missing)

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database, " * 100)
    with pytest.raises(StoreError, match="not a database") as broken:
        await SQLiteStore(garbage).open()
    assert permanent(broken)
    with pytest.raises(StoreError) as option:
        SQLiteStore.from_url(f"sqlite:///{tmp_path / 'x.db'}?busy_timeout=soon")
    assert permanent(option)


# -- retention -------------------------------------------------------------------


async def _finished(store: SQLiteStore, run: RunRecord) -> None:
    await store.create_run(run)
    claimed = await store.claim(run.id, A, 30.0)
    assert claimed is not None
    await store.finish_run(run.id, claimed.fence, "succeeded", "1", None)


async def test_prune_keeps_the_finished_children_of_an_unfinished_parent(
    store: SQLiteStore,
) -> None:
    await store.create_run(RunRecord("parent", "p", "{}"))
    parent = await store.claim("parent", A, 30.0)
    assert parent is not None
    await _finished(store, RunRecord("parent/c1", "p", "{}", parent_id="parent"))
    await store.create_run(RunRecord("parent/c2", "p", "{}", parent_id="parent"))
    waiting_for = f"{CHILDREN_WAIT}parent/"
    await store.suspend_run("parent", parent.fence, time.time() + 30, waiting_for)
    await _finished(store, RunRecord("orphan/c", "p", "{}", parent_id="orphan"))
    await _finished(store, RunRecord("alone", "p", "{}"))

    assert await store.prune(keep=0) == 2  # "alone" and the orphan: nobody needs them
    assert await store.prune(older_than=time.time() + 60) == 0
    assert await store.get_run("parent/c1") is not None

    await store.wake("parent", waiting_for)
    resumed = await store.claim("parent", A, 30.0)
    assert resumed is not None
    await store.finish_run("parent", resumed.fence, "succeeded", "2", None)
    assert await store.prune(keep=0) == 2  # the parent, and now its finished child
    assert [r.id for r in await store.list_runs()] == ["parent/c2"]  # unfinished stays


# -- mechanisms pinned by counts -------------------------------------------------


async def test_a_queue_rate_limits_how_many_runs_start(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [time.time()]
    monkeypatch.setattr(
        sqlite_claims, "time", SimpleNamespace(time=lambda: clock[0], monotonic=time.monotonic)
    )
    await store.set_queue("q", rate=2)
    await store.create_runs([RunRecord(f"r{i}", "p", "{}", queue="q") for i in range(8)])
    started: set[str] = set()

    async def starts() -> int:
        """Claim as a worker does: never a run it is already executing."""
        claimed = await store.claim_due(B, 30.0, 10, lambda r: r.id not in started, ["q"])
        started.update(r.id for r in claimed)
        return len(claimed)

    assert await starts() == 2  # a full bucket: two starts
    assert await starts() == 0  # at once again: none left
    clock[0] += 0.5
    assert await starts() == 1  # half a second buys one
    clock[0] += 60
    assert await starts() == 2  # a long pause refills the bucket, no further
    assert await starts() == 0


async def test_taking_a_signal_twice_for_one_step_reads_one_signal(store: SQLiteStore) -> None:
    await store.create_run(RunRecord("r", "p", "{}"))
    for payload in ('"first"', '"second"'):
        await store.send_signal("r", "go", payload)

    assert await store.take_signal("r", "go", "1") == '"first"'
    assert await store.take_signal("r", "go", "1") == '"first"'  # a retry after a crash
    assert await store.take_signal("r", "go", "2") == '"second"'
    assert await store.take_signal("r", "go", "3") is None
    assert await store.take_signal("r", "go", "1") == '"first"'
