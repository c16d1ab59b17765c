"""A signal sent ``once`` is refused when the run has had one of that name,
taken or not, and of two such sends racing on one run exactly one is kept:
what keeps a tool approval's wait to one decision (docs/approvals.md)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from tests.conftest import opened_store

import stalwart as sw
from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store


async def new_run(store: Store) -> str:
    rec, _ = await store.create_run(RunRecord(f"r-{uuid.uuid4().hex[:8]}", "p", "{}"))
    return rec.id


async def test_a_name_sent_once_is_refused_the_second_time_taken_or_not(
    any_store: Store,
) -> None:
    store = any_store
    run_id = await new_run(store)
    await store.send_signal(run_id, "approval:1#0.1", '"first"', once=True)
    with pytest.raises(sw.SignalRefused, match=r"has had a signal 'approval:1#0\.1' already"):
        await store.send_signal(run_id, "approval:1#0.1", '"second"', once=True)
    assert await store.take_signal(run_id, "approval:1#0.1", "1#0.2") == '"first"'
    with pytest.raises(sw.SignalRefused):
        await store.send_signal(run_id, "approval:1#0.1", '"third"', once=True)
    assert await store.take_signal(run_id, "approval:1#0.1", "1#0.9") is None


async def test_once_refuses_only_its_own_name_on_its_own_run(any_store: Store) -> None:
    store = any_store
    run_id, other = await new_run(store), await new_run(store)
    await store.send_signal(run_id, "approval:1#0.1", "true", once=True)
    await store.send_signal(run_id, "approval:1#0.3", "true", once=True)
    await store.send_signal(other, "approval:1#0.1", "true", once=True)
    await store.send_signal(run_id, "go", "1")
    await store.send_signal(run_id, "go", "2")  # without once, a name is sent again and again
    assert await store.take_signal(run_id, "go", "5") == "1"
    assert await store.take_signal(run_id, "go", "6") == "2"


@pytest.fixture
async def two_stores(store_url: str) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores on one SQLite file or PostgreSQL schema: two senders."""
    async for a in opened_store(store_url):
        async for b in opened_store(store_url):
            yield a, b


async def test_of_two_sends_once_racing_exactly_one_is_kept(
    two_stores: tuple[Store, Store],
) -> None:
    a, b = two_stores
    for _ in range(5):
        run_id = await new_run(a)
        got = await asyncio.gather(
            a.send_signal(run_id, "approval:1#0.1", '"a"', once=True),
            b.send_signal(run_id, "approval:1#0.1", '"b"', once=True),
            return_exceptions=True,
        )
        refused = [g for g in got if isinstance(g, sw.SignalRefused)]
        assert len(refused) == 1, got
        kept = '"a"' if isinstance(got[1], sw.SignalRefused) else '"b"'
        assert await a.take_signal(run_id, "approval:1#0.1", "1#0.2") == kept
        assert await a.take_signal(run_id, "approval:1#0.1", "1#0.4") is None


async def test_a_send_once_retried_with_its_uid_is_not_refused(store: Store) -> None:
    run_id = await new_run(store)
    send = store.send_signal  # SQLite and PostgreSQL take a uid: a retry is kept once
    await send(run_id, "approval:1#0.1", "true", uid="u1", once=True)  # type: ignore[call-arg]
    await send(run_id, "approval:1#0.1", "true", uid="u1", once=True)  # type: ignore[call-arg]
    assert await store.take_signal(run_id, "approval:1#0.1", "1#0.2") == "true"
    assert await store.take_signal(run_id, "approval:1#0.1", "1#0.4") is None
