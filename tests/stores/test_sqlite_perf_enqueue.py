"""The SQLite store's lean enqueue path (issue 17, item 3): one INSERT and
a COMMIT a new run, a wake index that holds timed rows only, and the same
contract as before: idempotent by id, a refused write undone whole, the file
left unlocked, step records batched beside a refused write kept."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from tests.records import step_record

from stalwart.core.errors import StoreError
from stalwart.core.ledger import RunRecord
from stalwart.stores.sqlite import SCHEMA_VERSION, SQLiteStore
from stalwart.stores.sqlite.schema import MIGRATIONS


def _v5_file(path: Path) -> None:
    """A file as Stalwart with schema version 5 left it."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE stalwart_schema (version INTEGER NOT NULL)")
    for version in range(1, 6):
        for statement in MIGRATIONS[version].split(";"):
            if statement.strip():
                db.execute(statement)
        db.execute("INSERT INTO stalwart_schema (version) VALUES (?)", (version,))
    db.close()


def test_a_pending_run_is_not_in_the_wake_index(tmp_path: Path) -> None:
    async def go() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        await store.open()
        await store.create_run(RunRecord("now", "p", "{}"))
        await store.create_run(RunRecord("later", "p", "{}", wake_at=time.time() + 60))
        rows = store.db.execute(
            "SELECT id FROM runs INDEXED BY runs_wake WHERE status = 'pending' "
            "AND wake_at IS NOT NULL"
        ).fetchall()
        assert rows == [("later",)]
        (sql,) = store.db.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'runs_wake'"
        ).fetchone()
        assert "WHERE wake_at IS NOT NULL" in sql
        await store.close()

    asyncio.run(go())


def test_a_version_5_file_upgrades_and_its_runs_are_still_claimed_and_woken(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    _v5_file(path)
    old = sqlite3.connect(path)
    now = time.time()
    cols = "id, policy, inputs, status, created_at, updated_at, wake_at"
    old.execute(
        f"INSERT INTO runs ({cols}) VALUES ('p', 'f', '{{}}', 'pending', ?, ?, NULL)", (now, now)
    )
    old.execute(
        f"INSERT INTO runs ({cols}) VALUES ('t', 'f', '{{}}', 'suspended', ?, ?, ?)",
        (now, now, now - 1),
    )
    old.commit()
    old.close()

    async def go() -> None:
        store = SQLiteStore(path)
        await store.open()
        versions = [v for (v,) in store.db.execute("SELECT version FROM stalwart_schema")]
        assert sorted(versions) == list(range(1, SCHEMA_VERSION + 1))
        assert await store.next_wake() == pytest.approx(now - 1)
        claimed = await store.claim_due("me", 30.0, 10, lambda _: True)
        assert sorted(r.id for r in claimed) == ["p", "t"]
        await store.close()

    asyncio.run(go())


def test_enqueue_by_id_is_idempotent_and_returns_what_is_stored(tmp_path: Path) -> None:
    async def go() -> None:
        store = SQLiteStore(tmp_path / "s.db")
        await store.open()
        first = RunRecord("r1", "p", '{"args":[1],"kwargs":{}}', queue="q", priority=3)
        stored, created = await store.create_run(first)
        assert created and stored == first
        again, created = await store.create_run(RunRecord("r1", "other", "{}"))
        assert not created
        assert (again.policy, again.inputs, again.queue, again.priority) == (
            "p",
            '{"args":[1],"kwargs":{}}',
            "q",
            3,
        )
        assert await store.get_run("r1") == again
        await store.close()

    asyncio.run(go())


def test_a_refused_enqueue_writes_nothing_and_leaves_the_file_unlocked(tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    async def go() -> None:
        store = SQLiteStore(path, busy_timeout=0.1)
        await store.open()
        bad = RunRecord("r1", "p", "\ud800")  # a lone surrogate cannot be stored
        with pytest.raises(StoreError, match="cannot store a value"):
            await store.create_run(bad)
        assert await store.get_run("r1") is None
        other = sqlite3.connect(path, timeout=0.1)
        other.execute("UPDATE runs SET priority = 1")  # the write lock is free
        other.commit()
        other.close()
        stored, created = await store.create_run(RunRecord("r1", "p", "{}"))
        assert created and stored.inputs == "{}"
        await store.close()

    asyncio.run(go())


def test_a_refused_enqueue_keeps_the_step_records_batched_beside_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"

    async def go() -> None:
        store = SQLiteStore(path, durability="group", group_delay=60.0)
        await store.open()
        await store.create_run(RunRecord("run", "p", "{}"))
        run = await store.claim("run", "me", 30.0)
        assert run is not None
        step = step_record("k1", name="s", args=None, started_at=1.0, finished_at=2.0)
        await store.record_step("run", run.fence, step)  # batched, not yet committed
        with pytest.raises(StoreError, match="cannot store a value"):
            await store.create_run(RunRecord("bad", "p", "\ud800"))
        # The refused write committed the batch beside it; the step is there
        # for any reader, and the refused run is not.
        reader = sqlite3.connect(path)
        assert reader.execute("SELECT key FROM steps").fetchall() == [("k1",)]
        assert reader.execute("SELECT id FROM runs").fetchall() == [("run",)]
        reader.close()
        await store.close()

    asyncio.run(go())
