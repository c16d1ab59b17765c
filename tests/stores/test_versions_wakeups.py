"""``Store.watch``'s ``"versions"`` kind: said when another connection names
a version the latest or retires one, not for every other commit (a flood of
writes costs no version wake-ups), and said again after PostgreSQL's
listening connection comes back (a change made meanwhile is not lost)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from tests.conftest import PG_URL, opened_store

from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store


class Watched:
    """Every wake-up a store's watch gave, in order."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.changed = asyncio.Event()

    def __call__(self, kind: str, queue: str | None) -> None:
        self.kinds.append(kind)
        self.changed.set()

    async def until(self, *kinds: str, after: int = 0) -> None:
        """Until a wake-up of one of ``kinds`` past the first ``after`` (30 s at most)."""
        async with asyncio.timeout(30):
            while not set(kinds) & set(self.kinds[after:]):
                self.changed.clear()
                await self.changed.wait()


@pytest.fixture
async def watching(store_url: str) -> AsyncIterator[tuple[Store, Store, Watched]]:
    """A store whose watch is running, and another connection to write with."""
    async for watched in opened_store(store_url):
        async for other in opened_store(store_url):
            seen = Watched()
            task = asyncio.create_task(watched.watch(seen))
            await seen.until("any")  # listening
            try:
                yield watched, other, seen
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)


async def test_a_flood_of_other_writes_says_nothing_of_versions_and_a_new_latest_does(
    watching: tuple[Store, Store, Watched],
) -> None:
    _, other, seen = watching
    await asyncio.sleep(0.2)  # the watch's first wake-ups are in
    start = len(seen.kinds)
    for i in range(200):
        await other.create_run(RunRecord(f"flood-{i}", "p", "{}"))
    await seen.until("any", "ready", after=start)  # the writes were seen
    await asyncio.sleep(0.2)
    assert "versions" not in seen.kinds[start:]
    mark = len(seen.kinds)
    await other.set_latest("v2")
    await seen.until("versions", after=mark)
    mark = len(seen.kinds)
    await other.retire_version("v2")
    await seen.until("versions", after=mark)


async def test_a_latest_named_while_postgres_listening_was_down_is_said_on_reconnect(
    store_url: str, watching: tuple[Store, Store, Watched]
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("a listening connection is PostgreSQL's")
    psycopg = pytest.importorskip("psycopg")
    _, other, seen = watching
    schema = store_url.split("schema=")[1].split("&")[0]
    await asyncio.sleep(0.2)
    mark = len(seen.kinds)
    async with await psycopg.AsyncConnection.connect(PG_URL, autocommit=True) as admin:
        cur = await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE query LIKE %s AND pid <> pg_backend_pid()",
            (f"LISTEN %{schema}%",),
        )
        assert [row[0] for row in await cur.fetchall()] == [True]  # this watch's, only
    await other.set_latest(f"v-{uuid.uuid4().hex[:6]}")  # possibly while nobody listens
    await seen.until("lost", after=mark)
    await seen.until("versions", after=mark)
