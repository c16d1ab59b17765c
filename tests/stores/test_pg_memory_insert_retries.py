"""PostgreSQL's ``memory_insert`` is safe to repeat, as every operation of
the store is: an insert whose first attempt committed but whose reply was
lost (a dropped connection) is retried and still says the row is its own,
and a claim made of it (a dataset's version) stays the claimant's."""

from __future__ import annotations

import time
from typing import Any

import pytest

from stalwart.core.memory import MemoryRecord
from stalwart.stores.base import Store


def _row(key: str, value: str) -> MemoryRecord:
    now = time.time()
    return MemoryRecord("claims", key, value, value, None, now, now)


async def test_an_insert_whose_reply_was_lost_is_still_the_inserters(
    store_url: str, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store_url.startswith("postgresql"):
        pytest.skip("a reply lost after the commit is a server's")
    psycopg = pytest.importorskip("psycopg")
    with_conn = store._with_conn  # type: ignore[attr-defined]

    async def reply_lost_after_the_first_commit(what: str, fn: Any) -> Any:
        async def attempt(conn: Any, n: int) -> Any:
            done = await fn(conn, n)  # autocommit: the statement has committed
            if n == 1:
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return done

        return await with_conn(what, attempt)

    monkeypatch.setattr(store, "_with_conn", reply_lost_after_the_first_commit)
    assert await store.memory_insert(_row("v1", "mine"))
    assert not await store.memory_insert(_row("v1", "another's"))  # taken: by us
    found = await store.memory_get("claims", "v1")
    assert found is not None and found.value == "mine"
