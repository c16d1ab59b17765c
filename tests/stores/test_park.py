"""``Store.park_run``: an unfinished run taken from every worker, only as
it was read and never from a live holder; parked, no worker claims it and
its former holder's writes are refused."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from tests.conftest import opened_store

from stalwart.core.errors import StaleLeaseError
from stalwart.core.ledger import RunRecord, StoredStep
from stalwart.stores.base import Store

MARK = "stalwart.move"


@pytest.fixture
async def store(any_store_url: str) -> AsyncIterator[Store]:
    async for s in opened_store(any_store_url):
        yield s


def _step(key: str) -> StoredStep:
    now = time.time()
    return StoredStep(key, "tick", "h", None, "1", None, 1, now, now)


async def test_a_parked_run_is_claimed_by_no_worker_and_its_holder_is_refused(
    store: Store,
) -> None:
    await store.create_run(RunRecord("r", "tick", "{}"))
    held = await store.claim("r", "gone-worker", 0.0)  # a lease that has expired
    assert held is not None
    assert await store.park_run(held, MARK)
    parked = await store.get_run("r")
    assert parked is not None
    assert (parked.status, parked.waiting_for, parked.wake_at, parked.owner) == (
        "suspended",
        MARK,
        None,
        None,
    )
    assert parked.fence == held.fence + 1
    assert await store.claim("r", "another", 30.0) is None
    assert await store.claim_due("another", 30.0, 10, lambda _: True) == []
    with pytest.raises(StaleLeaseError):
        await store.record_step("r", held.fence, _step("1"))
    await store.wake("r", MARK)  # what lets it go again
    again = await store.get_run("r")
    assert again is not None and again.status == "pending"


async def test_a_run_a_live_worker_holds_is_not_parked(store: Store) -> None:
    await store.create_run(RunRecord("r", "tick", "{}"))
    held = await store.claim("r", "live-worker-elsewhere", 60.0)
    assert held is not None
    assert not await store.park_run(held, MARK)
    after = await store.get_run("r")
    assert after is not None and (after.status, after.fence) == ("running", held.fence)
    await store.record_step("r", held.fence, _step("1"))  # the holder keeps writing


async def test_a_run_that_changed_since_it_was_read_is_not_parked(store: Store) -> None:
    await store.create_run(RunRecord("r", "tick", "{}"))
    seen = await store.get_run("r")
    assert seen is not None
    held = await store.claim("r", "gone-worker", 0.0)  # claimed meanwhile: fence moved
    assert held is not None
    assert not await store.park_run(seen, MARK)
    after = await store.get_run("r")
    assert after is not None and after.status == "running"


async def test_a_suspended_run_waiting_for_a_signal_is_parked_without_its_wait(
    store: Store,
) -> None:
    await store.create_run(RunRecord("r", "tick", "{}"))
    held = await store.claim("r", "w", 30.0)
    assert held is not None
    assert await store.suspend_run("r", held.fence, time.time() + 3600, "approval")
    seen = await store.get_run("r")
    assert seen is not None and await store.park_run(seen, MARK)
    await store.send_signal("r", "approval", '"yes"')  # no longer what it waits for
    parked = await store.get_run("r")
    assert parked is not None and (parked.status, parked.waiting_for) == ("suspended", MARK)
