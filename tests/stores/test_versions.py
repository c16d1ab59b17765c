"""What every store keeps about versions: workers by owner, versions in the
order first seen, at most one latest, retirement, and a run's clearances
and pin (fenced for its holder)."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

from stalwart.core.errors import CorruptedRecord
from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store
from stalwart.stores.sqlite import SQLiteStore
from stalwart.stores.versions import WorkerRecord


def _worker(owner: str, version: str, beat_at: float, lease: float = 30.0) -> WorkerRecord:
    return WorkerRecord(owner, version, {"job": version}, ("default",), lease, beat_at, beat_at)


async def test_workers_and_versions_are_kept_as_they_beat(any_store: Store) -> None:
    now = time.time() - 10  # beats a few seconds ago
    first = await any_store.beat_worker(_worker("h:1:a", "v1", now))
    assert [(v.version, v.latest, v.retired) for v in first] == [("v1", False, False)]
    await any_store.beat_worker(_worker("h:2:b", "v2", now + 1))
    await any_store.beat_worker(_worker("h:1:a", "v1", now + 2))  # a later beat, same row
    workers = await any_store.list_workers()
    assert [(w.owner, w.version, w.beat_at) for w in workers] == [
        ("h:1:a", "v1", now + 2),
        ("h:2:b", "v2", now + 1),
    ]
    assert workers[0].started_at == now and workers[0].policies == {"job": "v1"}
    assert workers[0].queues == ("default",)
    await any_store.forget_worker("h:2:b")
    stopped = [w for w in await any_store.list_workers() if w.owner == "h:2:b"]
    assert not stopped[0].live(time.time())


async def test_one_version_is_the_latest_and_retiring_it_leaves_none(any_store: Store) -> None:
    now = time.time()
    await any_store.beat_worker(_worker("h:1:a", "v1", now))
    await any_store.set_latest("v1")
    await any_store.set_latest("v2")  # unknown yet: added as the latest
    found = {v.version: (v.latest, v.retired) for v in await any_store.list_versions()}
    assert found == {"v1": (False, False), "v2": (True, False)}
    await any_store.retire_version("v2")
    await any_store.retire_version("v0")  # unknown: added retired
    found = {v.version: (v.latest, v.retired) for v in await any_store.list_versions()}
    assert found == {"v1": (False, False), "v2": (False, True), "v0": (False, True)}
    await any_store.set_latest("v2")  # serves again
    found = {v.version: (v.latest, v.retired) for v in await any_store.list_versions()}
    assert found["v2"] == (True, False)


async def test_clearances_add_up_and_a_pin_replaces_them(any_store: Store) -> None:
    await any_store.create_run(RunRecord("r", "job", "{}", code_version="v1"))
    await any_store.clear_run("r", ["v2"])
    got = await any_store.clear_run("r", ["v3", "v2"])
    assert got is not None and got.cleared == "v2 v3"
    assert await any_store.clear_run("nope", ["v2"]) is None
    pinned = await any_store.pin_run("r", "v3")
    assert pinned is not None and (pinned.code_version, pinned.cleared) == ("v3", None)
    claimed = await any_store.claim("r", "h:1:a", 30)
    assert claimed is not None
    assert await any_store.pin_run("r", "v4", fence=claimed.fence - 1) is None  # stale holder
    mine = await any_store.pin_run("r", "v4", fence=claimed.fence)
    assert mine is not None and mine.code_version == "v4"


async def test_a_finished_run_is_not_pinned(any_store: Store) -> None:
    await any_store.create_run(RunRecord("done", "job", "{}", status="succeeded", result="1"))
    assert await any_store.pin_run("done", "v2") is None


async def test_a_worker_row_edited_into_another_shape_names_the_worker(
    sqlite_store: SQLiteStore,
) -> None:
    await sqlite_store.beat_worker(_worker("h:1:a", "v1", time.time()))
    db = sqlite3.connect(sqlite_store.path)
    db.execute("UPDATE workers SET policies = '[1, 2]'")
    db.commit()
    db.close()
    with pytest.raises(CorruptedRecord, match="worker 'h:1:a': field 'policies'"):
        await sqlite_store.list_workers()


async def test_operators_naming_the_latest_at_once_both_succeed_and_one_wins(
    store_url: str,
) -> None:
    from stalwart.stores import open_store

    a, b = open_store(store_url), open_store(store_url)
    await a.open()
    await b.open()
    try:
        for i in range(20):
            await asyncio.gather(a.set_latest(f"x{i}"), b.set_latest(f"y{i}"))
            latest = [v.version for v in await a.list_versions() if v.latest]
            assert latest in ([f"x{i}"], [f"y{i}"])
    finally:
        await a.close()
        await b.close()
