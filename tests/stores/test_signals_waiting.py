"""A signal sent to a wait (``wait_fence``) is kept only while that wait is
open: the send that wakes the run is the wait's one answer, and of two
racing for one wait exactly one is kept; the other is refused, never queued
for the run's next wait of that name."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from tests.conftest import opened_store

import stalwart as sw
from stalwart.core.ledger import RunRecord
from stalwart.stores.base import Store


async def waiting_run(store: Store, name: str = "answer") -> tuple[str, int]:
    """A run suspended, waiting for the signal ``name``: its id and fence."""
    rec, _ = await store.create_run(RunRecord(f"r-{uuid.uuid4().hex[:8]}", "p", "{}"))
    return await wait_again(store, rec.id, name)


async def wait_again(store: Store, run_id: str, name: str = "answer") -> tuple[str, int]:
    """The run claimed, as a worker resuming it does, and suspended again on ``name``."""
    run = await store.claim(run_id, "host:1:x", 30)
    assert run is not None
    assert await store.suspend_run(run_id, run.fence, None, name)
    return run_id, run.fence


async def test_an_answer_to_a_wait_wakes_the_run_and_a_second_is_refused(any_store: Store) -> None:
    store = any_store
    run_id, fence = await waiting_run(store)
    woken = await store.send_signal(run_id, "answer", '"first"', wait_fence=fence)
    assert woken.status == "pending" and woken.waiting_for is None
    refused = r"no longer has that wait for a signal 'answer' open \(it is pending\)"
    with pytest.raises(sw.SignalRefused, match=refused):
        await store.send_signal(run_id, "answer", '"second"', wait_fence=fence)
    assert await store.take_signal(run_id, "answer", "2") == '"first"'
    assert await store.take_signal(run_id, "answer", "3") is None  # nothing queued for later


async def test_an_answer_to_a_wait_is_refused_by_the_next_wait_of_the_same_name(
    any_store: Store,
) -> None:
    """The run took the first answer and waits for ``answer`` again: an
    answer sent for the first wait is not the second's."""
    store = any_store
    run_id, fence = await waiting_run(store)
    await store.send_signal(run_id, "answer", '"name"', wait_fence=fence)
    assert await store.take_signal(run_id, "answer", "2") == '"name"'  # the run takes it
    _, next_fence = await wait_again(store, run_id)
    with pytest.raises(sw.SignalRefused, match=r"\(it is suspended\)"):
        await store.send_signal(run_id, "answer", '"late"', wait_fence=fence)
    await store.send_signal(run_id, "answer", '"city"', wait_fence=next_fence)
    assert await store.take_signal(run_id, "answer", "3") == '"city"'


async def test_an_answer_is_refused_by_a_wait_for_another_name_or_a_run_not_waiting(
    any_store: Store,
) -> None:
    store = any_store
    run_id, fence = await waiting_run(store, "answer")
    with pytest.raises(sw.SignalRefused, match="it is suspended"):
        await store.send_signal(run_id, "other", '"x"', wait_fence=fence)
    rec, _ = await store.create_run(RunRecord(f"r-{uuid.uuid4().hex[:8]}", "p", "{}"))
    with pytest.raises(sw.SignalRefused, match="it is pending"):
        await store.send_signal(rec.id, "answer", '"x"', wait_fence=rec.fence)
    await store.send_signal(rec.id, "answer", '"queued"')  # without waiting: queued as ever
    assert await store.take_signal(rec.id, "answer", "1") == '"queued"'


@pytest.fixture
async def two_stores(store_url: str) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores on one SQLite file or PostgreSQL schema: two senders."""
    async for a in opened_store(store_url):
        async for b in opened_store(store_url):
            yield a, b


async def test_of_two_answers_racing_for_one_wait_exactly_one_is_kept(
    two_stores: tuple[Store, Store],
) -> None:
    a, b = two_stores
    for _ in range(5):
        run_id, fence = await waiting_run(a)
        got = await asyncio.gather(
            a.send_signal(run_id, "answer", '"a"', wait_fence=fence),
            b.send_signal(run_id, "answer", '"b"', wait_fence=fence),
            return_exceptions=True,
        )
        refused = [g for g in got if isinstance(g, sw.SignalRefused)]
        assert len(refused) == 1, got
        kept = '"a"' if isinstance(got[1], sw.SignalRefused) else '"b"'
        assert await a.take_signal(run_id, "answer", "2") == kept
        assert await a.take_signal(run_id, "answer", "3") is None


async def test_an_answer_retried_with_its_uid_is_not_refused(any_store: Store) -> None:
    store = any_store
    run_id, fence = await waiting_run(store)
    await store.send_signal(run_id, "answer", '"a"', uid="u1", wait_fence=fence)
    await store.send_signal(run_id, "answer", '"a"', uid="u1", wait_fence=fence)  # a retry
    assert await store.take_signal(run_id, "answer", "2") == '"a"'
    assert await store.take_signal(run_id, "answer", "3") is None
